"""11 exercises 2, B.4 and the notebook's test kit: the reference ring-attention backward
(solutions_lib.dist.ring_backward) against full attention's autograd, and the checks of
solutions_lib.dist.probes_pipeline_context / checks_pipeline accepting a correct answer written
differently and rejecting the wrong answers with messages that say what was expected."""
from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist

from solutions_lib.dist import checks_pipeline as C
from solutions_lib.dist import probes_pipeline_context as P
from solutions_lib.grading import DelegationError, GradingError

pytestmark = pytest.mark.xdist_group("ring_backward")


def _copy_of_reference():
    """The reference's code compiled under another file name: what a student who wrote the same
    code hands in (the reference module itself is forbidden to the answer)."""
    import solutions_lib.dist.ring_backward as rb
    ns: dict = {}
    exec(compile(open(rb.__file__).read(), "<answer>", "exec"), ns)
    return ns["ring_attention_backward"]


def alternative(q, k, v, o, lse, do, causal=False):
    """Correct, written differently: four separate tensors, batch_isend_irecv, and each chunk's
    partial dK/dV sent straight to its owner instead of travelling with the chunk."""
    rank, p = dist.get_rank(), dist.get_world_size()
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    delta = (do * o).sum(-1, keepdim=True)
    dq = torch.zeros_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    kc, vc = k, v
    sends, partial = [], {}
    for j in range(p):
        src = (rank - j) % p
        if not (causal and src > rank):
            s = q @ kc.transpose(-2, -1) * scale
            if causal and src == rank:
                s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            pr = torch.exp(s - lse[..., None])
            ds = pr * (do @ vc.transpose(-2, -1) - delta)
            dq = dq + ds @ kc * scale
            partial[src] = ((ds.transpose(-2, -1) @ q) * scale, pr.transpose(-2, -1) @ do)
        else:
            partial[src] = (torch.zeros_like(k), torch.zeros_like(v))
        if j < p - 1:
            nk, nv = torch.empty_like(k), torch.empty_like(v)
            ops = [dist.P2POp(dist.isend, kc.contiguous(), (rank + 1) % p), dist.P2POp(dist.isend, vc.contiguous(), (rank + 1) % p),
                   dist.P2POp(dist.irecv, nk, (rank - 1) % p), dist.P2POp(dist.irecv, nv, (rank - 1) % p)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            kc, vc = nk, nv
    dk, dv = partial.pop(rank)
    for src, (a, b) in partial.items():
        sends += [dist.isend(a.contiguous(), src), dist.isend(b.contiguous(), src)]
    for src in range(p):
        if src != rank:
            a, b = torch.empty_like(k), torch.empty_like(v)
            dist.recv(a, src)
            dist.recv(b, src)
            dk, dv = dk + a, dv + b
    for w in sends:
        w.wait()
    return dq, dk, dv


def _no_return_hop(q, k, v, o, lse, do, causal=False):
    """Wrong: dK/dV stay on the rank the chunk visited last."""
    rank, p = dist.get_rank(), dist.get_world_size()
    scale = 1.0 / math.sqrt(q.shape[-1])
    D = (do * o).sum(-1, keepdim=True)
    dq, kv = torch.zeros_like(q), torch.stack([k, v])
    dkv = torch.zeros_like(kv)
    for j in range(p):
        s = (q @ kv[0].transpose(-2, -1)) * scale
        P_ = torch.exp(s - lse.unsqueeze(-1))
        dkv[1] += P_.transpose(-2, -1) @ do
        dS = P_ * (do @ kv[1].transpose(-2, -1) - D)
        dq += (dS @ kv[0]) * scale
        dkv[0] += (dS.transpose(-2, -1) @ q) * scale
        if j < p - 1:
            t = torch.cat([kv, dkv]).contiguous()
            out = torch.empty_like(t)
            w = dist.isend(t, (rank + 1) % p)
            dist.recv(out, (rank - 1) % p)
            w.wait()
            kv, dkv = out[:2], out[2:].clone()
    return dq, dkv[0], dkv[1]


def _all_gather(q, k, v, o, lse, do, causal=False):
    """Wrong (the shortcut): all-gathers K and V, all-reduces dK/dV of the whole sequence."""
    rank, p = dist.get_rank(), dist.get_world_size()
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    ks, vs = [torch.empty_like(k) for _ in range(p)], [torch.empty_like(v) for _ in range(p)]
    dist.all_gather(ks, k.contiguous())
    dist.all_gather(vs, v.contiguous())
    K, V = torch.cat(ks, -2), torch.cat(vs, -2)
    pr = torch.exp(q @ K.transpose(-2, -1) * scale - lse.unsqueeze(-1))
    dS = pr * (do @ V.transpose(-2, -1) - (do * o).sum(-1, keepdim=True))
    dK, dV = (dS.transpose(-2, -1) @ q) * scale, pr.transpose(-2, -1) @ do
    dist.all_reduce(dK)
    dist.all_reduce(dV)
    return (dS @ K) * scale, dK[..., rank * n:(rank + 1) * n, :], dV[..., rank * n:(rank + 1) * n, :]


@pytest.mark.parametrize("causal", [False, True])
def test_reference_copy_and_alternative_pass(causal):
    ref = _copy_of_reference()
    P.check_ring_backward(ref, 3, (2, 6, 3), 5, causal)
    P.check_ring_backward(alternative, 2, (1, 2, 4, 5), 7, causal)


def test_traffic_accepts_the_ring_and_direct_returns():
    P.check_ring_backward_traffic(_copy_of_reference(), 5, (1, 10, 4), 1)
    P.check_ring_backward_traffic(alternative, 2, (2, 6, 3), 0)


def test_the_reference_module_itself_is_delegation():
    from solutions_lib.dist.ring_backward import ring_attention_backward
    with pytest.raises(DelegationError, match="ring_backward"):
        P.check_ring_backward(ring_attention_backward, 2, (1, 4, 2), 0, False)


def test_gradients_left_on_the_visitor_are_caught():
    with pytest.raises(GradingError, match="rank 0's dk vs full attention's autograd.*come back to its owner"):
        P.check_ring_backward(_no_return_hop, 2, (2, 6, 3), 0, False)


def test_all_gather_is_caught_by_the_collectives():
    P.check_ring_backward(_all_gather, 2, (2, 6, 3), 0, False)          # right gradients
    with pytest.raises(GradingError, match=r"collective calls .*all_gather"):
        P.check_ring_backward_traffic(_all_gather, 2, (2, 6, 3), 0)


def test_ring_backward_bytes_formula():
    assert P.ring_backward_bytes((2, 6, 3), 2) == (4 + 2) * 18 * 8
    assert P.ring_backward_bytes((1, 10, 4), 5) == 18 * 8 * 8
    assert P.ring_backward_bytes((1, 4, 2), 1) == 0


def test_full_attention_grads_is_autograd_of_softmax_attention():
    full = P.full_attention_grads((1, 4, 3), 2, True)
    q, k, v, do = P.cp_inputs((1, 4, 3), 2, 4)
    assert torch.allclose(full["o"], P.full_attention((1, 4, 3), 2, True))
    assert torch.isfinite(full["lse"]).all() and full["dq"][0, 0].abs().sum() == 0   # row 0 sees key 0 only


def test_checks_kit_helpers():
    assert C.exact_zigzag(8, 2) == [[0, 1, 6, 7], [2, 3, 4, 5]]
    with pytest.raises(ValueError, match="2p must divide"):
        C.exact_zigzag(6, 2)
    assert C.exact_schedule("1f1b", 0, 2, 3) == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("B", 2)]
    assert C.exact_layout(2, 2)["dp_groups"] == [(0, 2), (1, 3)]
    assert C.as_ints([1.0, 2]) == [1, 2] and C.as_ints(None).startswith("not a list of ints")
    assert C.as_lists([[1]]) == [[1]] and C.as_table({}).startswith("not a dict")
    (oa, la), (ob, lb), (o, l) = C.merge_case((2, 3, 7), 3, 0)
    mo, ml = C.exact_merge(oa, la, ob, lb)
    assert torch.allclose(mo, o) and torch.allclose(ml, l)
