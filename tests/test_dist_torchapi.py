"""11 exercises 5 (torch's own APIs): the probes of solutions_lib.dist.probes_torchapi against
independent oracles, and the notebook's model answers against the probes.

Oracles: one process (the mean over ranks / micro-batches of the per-batch gradients, computed with
plain autograd on the whole model), closed-form group layouts (TP innermost), and the textbook
GPipe / 1F1B orders (each backward after its forward, at most p - s micro-batches in flight).
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from solutions_lib.dist import launch, launch_graded
from solutions_lib.dist import probes_torchapi as P

pytestmark = pytest.mark.xdist_group("dist_torchapi")


# ----------------------------------------------------------------- the notebook's model answers

def torch_mesh(dp, tp):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))


def shard_with_fsdp2(model):
    from torch.distributed.fsdp import fully_shard

    for module in model.modules():
        if isinstance(module, nn.Linear):
            fully_shard(module)
    fully_shard(model)
    return model


def parallelize_mlp(mlp, mesh, sequence_parallel=False):
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    if sequence_parallel:
        plan = {"norm": SequenceParallel(), "fc1": ColwiseParallel(input_layouts=Shard(1)),
                "fc2": RowwiseParallel(output_layouts=Shard(1))}
    else:
        plan = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    return parallelize_module(mlp, mesh, plan)


def torch_pipeline_step(model, x, target, loss_fn, n_microbatches, schedule):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    rank, p = dist.get_rank(), dist.get_world_size()
    L = len(model)
    stage = PipelineStage(model[rank * L // p:(rank + 1) * L // p], rank, p, torch.device("cpu"))
    runner = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule](stage, n_microbatches=n_microbatches,
                                                                       loss_fn=loss_fn)
    losses = []
    if rank == 0:
        runner.step(x)
    elif rank == p - 1:
        runner.step(target=target, losses=losses)
    else:
        runner.step()
    return [float(v.detach()) for v in losses]


# ----------------------------------------------------------------- pure helpers

@pytest.mark.parametrize("p,m", [(2, 4), (4, 4), (4, 6), (3, 2), (1, 3)])
def test_schedule_events_are_gpipe_and_1f1b(p, m):
    for s in range(p):
        for kind in ("gpipe", "1f1b"):
            ev = P.schedule_events(kind, s, p, m)
            assert sorted(ev) == sorted([f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)])
            assert all(ev.index(f"F{i}") < ev.index(f"B{i}") for i in range(m))
            assert [e for e in ev if e[0] == "F"] == [f"F{i}" for i in range(m)]
            in_flight = max(sum(1 if e[0] == "F" else -1 for e in ev[:k + 1]) for k in range(len(ev)))
            assert in_flight == (m if kind == "gpipe" else min(p - s, m))


def test_local_numel_of_plain_tensor():
    assert P.local_numel(torch.zeros(3, 4)) == 12


# ----------------------------------------------------------------- the by-hand sides against one process

def _pp_hand(rank, world, m):
    model = P.pp_model(3, 5, 4)
    g = torch.Generator().manual_seed(9)
    x, t = torch.randn(2 * m, 5, generator=g, dtype=torch.float64), torch.randn(2 * m, 5, generator=g, dtype=torch.float64)
    losses = P.hand_pipeline(model, x, t, m)
    return losses, [None if l[0].weight.grad is None else l[0].weight.grad for l in model]


@pytest.mark.parametrize("world,m", [(2, 4), (4, 5)])
def test_hand_pipeline_matches_one_process(world, m):
    out = launch(_pp_hand, world, args=(m,))
    model = P.pp_model(3, 5, 4)
    g = torch.Generator().manual_seed(9)
    x, t = torch.randn(2 * m, 5, generator=g, dtype=torch.float64), torch.randn(2 * m, 5, generator=g, dtype=torch.float64)
    losses = []
    for xb, tb in zip(x.chunk(m), t.chunk(m)):
        loss = ((model(xb) - tb) ** 2).mean()
        (loss / m).backward()
        losses.append(float(loss.detach()))
    assert out[-1][0] == pytest.approx(losses, rel=1e-12)
    assert all(r[0] == [] for r in out[:-1])
    for r, (_, grads) in enumerate(out):
        for j, gr in enumerate(grads):
            if r * 4 // world <= j < (r + 1) * 4 // world:
                torch.testing.assert_close(gr, model[j][0].weight.grad, rtol=1e-10, atol=1e-12)
            else:
                assert gr is None


def test_mesh_probe_with_model_answer():
    cases = [(2, 2), (1, 4), (4, 1)]
    out = launch_graded(P.mesh_rank, 4, args=(torch_mesh, cases))
    for r, reps in enumerate(out):
        for (dp, tp), rep in zip(cases, reps):
            d, t = divmod(r, tp)
            assert rep["hand_tp"] == rep["tp"] == list(range(d * tp, (d + 1) * tp))
            assert rep["hand_dp"] == rep["dp"] == list(range(t, 4, tp))
            assert rep["coord"] == rep["hand_coord"] == [d, t]
            assert rep["tp_sum"] == sum((q + 1) ** 2 for q in rep["tp"]) == rep["hand_tp_sum"]
            assert rep["counted"] == 2


@pytest.mark.parametrize("world", [2, 4])
def test_fsdp_probe_model_answer_and_one_process(world):
    case = dict(seed=5, dims=[4, 8, 12, 4], lr=0.1, batch=3)
    out = launch_graded(P.fsdp_rank, world, args=(shard_with_fsdp2, case))
    # one process: the mean over ranks of each rank's gradient
    model = P.fsdp_model(case["seed"], case["dims"])
    g = torch.Generator().manual_seed(case["seed"] + 1)
    xs = [torch.randn(case["batch"], 4, generator=g) for _ in range(world)]
    ys = [torch.randn(case["batch"], 4, generator=g) for _ in range(world)]
    sum(F.mse_loss(model(x), y) for x, y in zip(xs, ys)).div(world).backward()
    want = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).double()
    n_params = want.numel()
    for rep in out:
        torch.testing.assert_close(rep["hand_grads"], want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(rep["grads"], want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(rep["after"], rep["hand_after"], rtol=1e-5, atol=1e-6)
        assert rep["local"] == [n // world for n in rep["full"]]
        assert rep["fwd"]["all_gather"] == (3, 4 * n_params)
        assert rep["hand_fwd"]["all_gather"] == (1, 4 * n_params)
        assert rep["bwd"]["all_gather"][0] == 3 and rep["bwd"]["reduce_scatter"] == (3, 4 * n_params)
        assert rep["hand_bwd"]["reduce_scatter"] == (1, 4 * n_params)


@pytest.mark.parametrize("sp", [False, True])
def test_tp_probe_model_answer_and_one_process(sp):
    from solutions_lib.dist import tp_lab

    case = dict(seed=2, hidden=8, batch=2, seq_len=4, sequence_parallel=sp)
    out = launch_graded(P.tp_rank, 2, args=(parallelize_mlp, case))
    full, x, w = P.tp_case(2, 8, 2, 4)
    y, xg, grads = tp_lab.one_process(full, x, w)
    for r, rep in enumerate(out):
        lo, hi = (2 * r, 2 * r + 2) if sp else (0, 4)
        torch.testing.assert_close(rep["hand_out"], y[:, lo:hi], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(rep["out"], rep["hand_out"], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(rep["hand_xgrad"], xg[:, lo:hi], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(rep["xgrad"], rep["hand_xgrad"], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(rep["hand_norm_g"], torch.cat([grads["norm.weight"], grads["norm.bias"]]),
                                   rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(rep["norm_g"], rep["hand_norm_g"], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(rep["fc1_g"], grads["fc1.weight"][16 * r:16 * (r + 1)], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(rep["fc2_g"], grads["fc2.weight"][:, 16 * r:16 * (r + 1)], rtol=1e-10, atol=1e-12)
        want = {"all_gather": 1, "reduce_scatter": 1} if sp else {"all_reduce": 1}
        assert rep["fwd"] == rep["hand_fwd"] == want and rep["bwd"] == rep["hand_bwd"] == want


def test_pp_probe_model_answer():
    case = dict(seed=1, width=5, layers=8, m=4, batch=8, schedules=["gpipe", "1f1b"])
    out = launch_graded(P.pp_rank, 4, args=(torch_pipeline_step, case))
    for r, reps in enumerate(out):
        for rep in reps:
            assert rep["ran"] == rep["has_grad"] == [int(2 * r <= j < 2 * r + 2) for j in range(8)]
            torch.testing.assert_close(rep["grads"], rep["hand_grads"], rtol=1e-9, atol=1e-12)
            assert rep["losses"] == pytest.approx(rep["hand_losses"], rel=1e-12)
            assert rep["events"] == P.schedule_events(rep["schedule"], r, 4, 4)
            assert rep["p2p"] > 0 and rep["collectives"] == 0
