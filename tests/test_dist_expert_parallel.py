"""solutions_lib.dist.expert_parallel on 2 and 4 gloo ranks against the dense one-process MoE."""
import pytest
import torch
import torch.distributed as dist

from solutions_lib import moe
from solutions_lib import probes_moe as P
from solutions_lib.dist import expert_parallel as ep
from solutions_lib.dist.launch import launch


def _check(world, group_size, skew, top_k=2, n_experts=None, hidden=6):
    n_experts = n_experts or 2 * group_size
    case = P.ep_case(31 + world, world, 5, hidden, n_experts, skew=skew)
    res = launch(P.ep_rank, world, args=(ep.ep_moe, case, top_k, group_size, ()))
    y, dx, dw, grads = P.assemble_ep(res, n_experts, 4)
    y1, dx1, dw1, g1 = P.ep_one_process(case, world, top_k)
    torch.testing.assert_close(y, y1)
    torch.testing.assert_close(dx, dx1)
    torch.testing.assert_close(dw, dw1)
    for a, b in zip(grads, g1):
        torch.testing.assert_close(a, b)
    xs, w, _, _ = case
    # bytes: per token top_k h e each way, summed over ranks, in the forward and in the backward
    T = sum(x.shape[0] for x in xs)
    data = T * top_k * hidden * 8
    for key in ("fwd", "bwd"):
        fl = sum(sum(v for op, v in r[key][0].items() if op in P.A2A) for r in res)
        other = sum(sum(v for op, v in r[key][0].items() if op not in P.A2A) for r in res)
        assert fl == 2 * data and other == 0, (key, fl, 2 * data, other)
    assert sum(r["fwd"][1].get("all_to_all_single", 0) for r in res) == world * n_experts * 8
    # sparse compute: each expert called on exactly the rows routed to it (by all ranks of its EP group)
    ranks_of_group = [list(range(d * group_size, (d + 1) * group_size)) for d in range(world // group_size)]
    for members in ranks_of_group:
        xg = torch.cat([xs[r] for r in members])
        rows = [n for r in members for n in res[r]["rows"]]
        assert rows == P.expected_rows(xg, w, top_k, n_experts)


@pytest.mark.parametrize("world,group,skew", [(2, 2, 0.0), (2, 2, 3.0), (4, 4, 0.0), (4, 4, 6.0), (4, 2, 1.0)])
def test_ep_equals_one_process(world, group, skew):
    _check(world, group, skew)


def test_ep_top1_and_many_experts_per_rank():
    _check(2, 2, 2.0, top_k=1, n_experts=8)


def _mesh_step(rank, world, case, top_k):
    xs, w, experts, ows = case
    ep_group, dp_group = ep.ep_dp_groups(2)
    per = len(experts) // 2
    mine = [copy_e for copy_e in (torch.nn.ModuleList(experts)[i] for i in range((rank % 2) * per, (rank % 2 + 1) * per))]
    import copy
    mine = [copy.deepcopy(e) for e in mine]
    wr = w.clone().requires_grad_(True)
    y = ep.ep_moe(xs[rank], wr, mine, top_k, len(experts), group=ep_group)
    (y * ows[rank]).sum().backward()
    ep.sync_ep_dp_grads(wr, mine, dp_group)
    return wr.grad, {i: [p.grad for p in e.parameters()] for i, e in zip(range((rank % 2) * per, (rank % 2 + 1) * per), mine)}


def test_ep_dp_mesh_gradients_after_sync():
    case = P.ep_case(5, 4, 4, 6, 4, skew=1.0)
    res = launch(_mesh_step, 4, args=(case, 2))
    _, _, dw1, g1 = P.ep_one_process(case, 4, 2)
    for dw, grads in res:
        torch.testing.assert_close(dw, dw1)              # router: summed over every rank
        for i, gs in grads.items():
            for a, b in zip(gs, g1[4 * i:4 * i + 4]):
                torch.testing.assert_close(a, b)         # expert: summed over its DP replicas


def test_ep_validation():
    def f(rank, world):
        out = []
        for bad in (lambda: ep.ep_moe(torch.zeros(3, 4), torch.zeros(4, 3), [None], 1, 3),
                    lambda: ep.ep_moe(torch.zeros(3, 4), torch.zeros(4, 4), [None], 1, 4)):
            try:
                bad()
                out.append(False)
            except ValueError:
                out.append(True)
        return out
    assert launch(f, 2) == [[True, True], [True, True]]


def test_bench_moe_runs():
    lines = []
    ep.bench_moe(out=lines.append)
    assert len(lines) == 6 and "formula" in lines[0]
