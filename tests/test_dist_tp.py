"""Tensor and sequence parallelism by hand (solutions_lib.dist.tensor_parallel) against one process.

Oracle: `solutions_lib.models.Block` (a pre-LN transformer layer) run whole in the same rank on
the same data (float64, so the only difference is the order of the row-parallel sums). Each rank's
shards and gradients are compared with the matching slices of the single-process ones;
communication is counted with CommCounter; activation bytes with saved-tensor hooks against
`memory.activation_bytes_per_layer`.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist.tensor_parallel import (ColumnParallelLinear, RowParallelLinear, TensorParallelBlock,
                                                causal_mask, shard_rows, tp_comm_bytes_per_step,
                                                tp_comm_calls_per_step)
from solutions_lib.memory import activation_bytes_per_layer
from solutions_lib.models import Block

pytestmark = pytest.mark.xdist_group("dist_tp")

B, S, H, A = 2, 8, 16, 4


def _data(dtype, seed=0):
    torch.manual_seed(seed)
    block = Block(H, A, 4).to(dtype)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(B, S, H, generator=g, dtype=dtype)
    w = torch.randn(B, S, H, generator=g, dtype=dtype)  # loss = sum(out * w)
    return block, x, w


def _max(a, b) -> float:
    return float((a - b).abs().max())


def _saved_bytes(module, x, mask) -> int:
    """Bytes of the distinct storages autograd saves in module(x, mask), parameters and the
    mask left out; the layer input counts (the formula's first LayerNorm input)."""
    skip = {p.untyped_storage().data_ptr() for p in module.parameters()} | {mask.untyped_storage().data_ptr()}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in skip:
            seen[st.data_ptr()] = st.nbytes()
        return t

    x.requires_grad_(True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x, mask)
    return sum(seen.values())


def _tp_rank(rank, world, sequence_parallel):
    block, x, w = _data(torch.float64)
    mask = causal_mask(S)
    xr = x.clone().requires_grad_(True)
    (block(xr, mask) * w).sum().backward()
    ref_out = block(x, mask).detach()

    tp = TensorParallelBlock(block, sequence_parallel=sequence_parallel)
    tp.zero_grad()
    lo, hi = (rank * S // world, (rank + 1) * S // world) if sequence_parallel else (0, S)
    xin = x[:, lo:hi].clone().requires_grad_(True)
    with CommCounter() as fwd:
        out = tp(xin, mask)
    with CommCounter() as bwd:
        (out * w[:, lo:hi]).sum().backward()
        synced = tp.allreduce_replicated_grads()
    k_in = H * 4 // world
    diffs = {
        "out": _max(out, ref_out[:, lo:hi]),
        "x.grad": _max(xin.grad, xr.grad[:, lo:hi]),
        "qkv.weight": _max(tp.attn.qkv.weight.grad, shard_rows(block.qkv.weight.grad, rank, world, 3)),
        "qkv.bias": _max(tp.attn.qkv.bias.grad, shard_rows(block.qkv.bias.grad, rank, world, 3)),
        "proj.weight": _max(tp.attn.proj.weight.grad, block.proj.weight.grad[:, rank * H // world:(rank + 1) * H // world]),
        "proj.bias": _max(tp.attn.proj.bias.grad, block.proj.bias.grad),
        "fc1.weight": _max(tp.mlp.fc1.weight.grad, shard_rows(block.fc1.weight.grad, rank, world)),
        "fc2.weight": _max(tp.mlp.fc2.weight.grad, block.fc2.weight.grad[:, rank * k_in:(rank + 1) * k_in]),
        "fc2.bias": _max(tp.mlp.fc2.bias.grad, block.fc2.bias.grad),
        "ln1": max(_max(tp.ln1.weight.grad, block.ln1.weight.grad), _max(tp.ln1.bias.grad, block.ln1.bias.grad)),
        "ln2": max(_max(tp.ln2.weight.grad, block.ln2.weight.grad), _max(tp.ln2.bias.grad, block.ln2.bias.grad)),
    }
    # sub-blocks alone: Megatron's "one all-reduce per block per direction"
    sub = {}
    if not sequence_parallel:
        h = torch.randn(B, S, H, dtype=torch.float64, requires_grad=True)
        for name, fn in (("attn", lambda z: tp.attn(z, mask)), ("mlp", tp.mlp)):
            with CommCounter() as f:
                y = fn(h)
            with CommCounter() as b:
                y.sum().backward()
            sub[name] = (dict(f.calls), dict(b.calls))
    # activation bytes in float32 (the formula's bytes_per_value=4, no dropout)
    block32, x32, _ = _data(torch.float32)
    tp32 = TensorParallelBlock(block32, sequence_parallel=sequence_parallel)
    saved = _saved_bytes(tp32, x32[:, lo:hi].clone(), mask)
    return dict(diffs=diffs, fwd=dict(fwd.summary()), bwd=dict(bwd.summary()), synced=synced, sub=sub, saved=saved)


def _merge(fwd, bwd):
    out = {}
    for d in (fwd, bwd):
        for op, (calls, nbytes) in d.items():
            c, b = out.get(op, (0, 0))
            out[op] = (c + calls, b + nbytes)
    return out


def _expected_saved(world, sequence_parallel):
    """Korthikanti's terms for this block (fp32, no dropout) plus what the formula leaves out:
    each LayerNorm's mean and rstd (b s values each, per rank b s/t under SP), 4 bytes."""
    formula = activation_bytes_per_layer(S, B, H, A, tp=world, sequence_parallel=sequence_parallel,
                                         bytes_per_value=4, dropout=False)
    s_local = S // world if sequence_parallel else S
    return formula + 2 * 2 * B * s_local * 4, formula


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("sequence_parallel", [False, True], ids=["tp", "tp+sp"])
def test_tp_block_matches_one_process(world, sequence_parallel):
    for rank, r in enumerate(launch(_tp_rank, world, args=(sequence_parallel,), timeout=60)):
        bad = {k: v for k, v in r["diffs"].items() if not v < 1e-12}
        assert not bad, f"rank {rank} of {world}: differs from the single-process block by {bad}"
        calls = {op: c for op, (c, _) in _merge(r["fwd"], r["bwd"]).items()}
        assert calls == tp_comm_calls_per_step(1, world, sequence_parallel), (rank, r["fwd"], r["bwd"])
        fwd_calls = {op: c for op, (c, _) in r["fwd"].items()}
        assert fwd_calls == tp_comm_calls_per_step(1, world, sequence_parallel, backward=False)
        nbytes = {op: b for op, (_, b) in _merge(r["fwd"], r["bwd"]).items()}
        assert nbytes == tp_comm_bytes_per_step(B, S, H, 1, world, sequence_parallel, bytes_per_element=8)
        if not sequence_parallel:
            for name, (f, b) in r["sub"].items():
                assert f == {"all_reduce": 1} and b == {"all_reduce": 1}, (name, f, b)
        expected, formula = _expected_saved(world, sequence_parallel)
        assert r["saved"] == expected, (f"rank {rank}: saved {r['saved']} B, Korthikanti's terms {formula:.0f} B "
                                        f"+ LayerNorm statistics = {expected:.0f} B")


def _linear_rank(rank, world):
    torch.manual_seed(3)
    fc1, fc2 = nn.Linear(6, 8).double(), nn.Linear(8, 5).double()
    x = torch.randn(3, 6, dtype=torch.float64)
    xr = x.clone().requires_grad_(True)
    fc2(torch.tanh(fc1(xr))).pow(2).sum().backward()
    col, row = ColumnParallelLinear(fc1), RowParallelLinear(fc2)
    xin = x.clone().requires_grad_(True)
    with CommCounter() as c:
        y = row(torch.tanh(col(xin)))
        y.pow(2).sum().backward()
    gathered = ColumnParallelLinear(fc1, gather_output=True)(x)
    return (_max(y, fc2(torch.tanh(fc1(x)))), _max(xin.grad, xr.grad),
            _max(col.weight.grad, shard_rows(fc1.weight.grad, rank, world)),
            _max(row.weight.grad, fc2.weight.grad[:, rank * 8 // world:(rank + 1) * 8 // world]),
            _max(gathered, fc1(x)), dict(c.calls))


def test_column_then_row_linear_on_two_ranks():
    for r in launch(_linear_rank, 2, timeout=60):
        *diffs, calls = r
        assert max(diffs) < 1e-12, diffs
        assert calls == {"all_reduce": 2}, calls  # g forward, f backward


def _bad_rank(rank, world):
    msgs = []
    torch.manual_seed(0)
    for make in (lambda: ColumnParallelLinear(nn.Linear(4, 5)),            # 5 outputs over 2 ranks
                 lambda: RowParallelLinear(nn.Linear(5, 4)),               # 5 inputs over 2 ranks
                 lambda: TensorParallelBlock(Block(12, 3, 4))):            # 3 heads over 2 ranks
        try:
            make()
            msgs.append(None)
        except ValueError as e:
            msgs.append(str(e))
    return msgs


def test_bad_shapes_raise_value_error_with_the_reason():
    for msgs in launch(_bad_rank, 2, timeout=60):
        assert all(m and "must divide" in m for m in msgs), msgs


def test_comm_formulas_without_ranks():
    assert tp_comm_calls_per_step(3, 1) == {}
    assert tp_comm_calls_per_step(3, 2) == {"all_reduce": 12}
    assert tp_comm_calls_per_step(2, 4, sequence_parallel=True) == {
        "all_gather_into_tensor": 12, "reduce_scatter_tensor": 8, "all_reduce": 2}
    assert tp_comm_bytes_per_step(2, 8, 16, 1, 2, bytes_per_element=2) == {"all_reduce": 4 * 2 * 8 * 16 * 2}
    with pytest.raises(ValueError, match="layers"):
        tp_comm_calls_per_step(0, 2)


# ---------------------------------------------------------------- a 2-D mesh: DP x TP on 4 ranks


def _mesh_data(dp, steps):
    """Per step, one (x, loss weight w) per DP replica, (B, S, H) float64 (also the NCCL test's case)."""
    g = torch.Generator().manual_seed(5)
    return [[(torch.randn(B, S, H, generator=g, dtype=torch.float64),
              torch.randn(B, S, H, generator=g, dtype=torch.float64)) for _ in range(dp)] for _ in range(steps)]


def _sgd(module, lr):
    """Plain SGD by hand (torch.optim's first use in a forked rank costs seconds); clears the grads."""
    with torch.no_grad():
        for p in module.parameters():
            p -= lr * p.grad
            p.grad = None


def _mesh_rank(rank, world, dp, tp, steps=2, lr=0.1):
    from solutions_lib.dist.mesh import average_gradients, count_by_group, init_mesh

    mesh = init_mesh(dp, tp)
    block, _, _ = _data(torch.float64)
    ref, _, _ = _data(torch.float64)
    mask = causal_mask(S)
    data = _mesh_data(dp, steps)

    def sgd(module):
        _sgd(module, lr)

    for step in data:  # one process: the mean of the dp replicas' losses
        for x, w in step:
            ((ref(x, mask) * w).sum() / dp).backward()
        sgd(ref)
    tpb = TensorParallelBlock(block, group=mesh.tp_group)
    with count_by_group() as calls:
        for step in data:
            x, w = step[mesh.dp_rank]
            (tpb(x, mask) * w).sum().backward()
            average_gradients(tpb.parameters(), mesh.dp_group)
            sgd(tpb)
    t, k_in = mesh.tp_rank, H * 4 // tp
    diffs = [
        _max(tpb.attn.qkv.weight, shard_rows(ref.qkv.weight.detach(), t, tp, 3)),
        _max(tpb.attn.proj.weight, ref.proj.weight.detach()[:, t * H // tp:(t + 1) * H // tp]),
        _max(tpb.mlp.fc1.weight, shard_rows(ref.fc1.weight.detach(), t, tp)),
        _max(tpb.mlp.fc2.weight, ref.fc2.weight.detach()[:, t * k_in:(t + 1) * k_in]),
        _max(tpb.ln1.weight, ref.ln1.weight.detach()), _max(tpb.mlp.fc2.bias, ref.fc2.bias.detach()),
    ]
    return diffs, dict(calls), mesh.tp_ranks, mesh.dp_ranks


def test_dp_x_tp_mesh_matches_one_process():
    steps = 2
    for rank, (diffs, calls, tp_ranks, dp_ranks) in enumerate(launch(_mesh_rank, 4, args=(2, 2, steps), timeout=60)):
        assert max(diffs) < 1e-12, (rank, diffs)
        assert tp_ranks == (rank // 2 * 2, rank // 2 * 2 + 1) and dp_ranks == (rank % 2, rank % 2 + 2)
        assert calls == {("all_reduce", tp_ranks): 4 * steps, ("all_reduce", dp_ranks): steps}, (rank, calls)


def test_mesh_coordinates_and_bad_sizes():
    from solutions_lib.dist.mesh import mesh_coordinates

    assert [mesh_coordinates(r, 2, 4) for r in (0, 3, 4, 7)] == [(0, 0), (0, 3), (1, 0), (1, 3)]
    with pytest.raises(ValueError, match="rank"):
        mesh_coordinates(8, 2, 4)


# ---------------------------------------------------------------- the notebook's SP / bias-free layer cases

def _sp_layers_rank(rank, world):
    from solutions_lib.dist import probes_tp as PT
    from solutions_lib.dist import tp_lab as TL
    (fc1, fc2), x, (_, w) = PT.seq_linear_case(4, [6, 8, 4], 2, 4, bias=False)
    col = TL.ColumnParallelLinear(fc1, enter=TL.GatherFromSP.apply)
    row = TL.RowParallelLinear(fc2, exit=TL.ScatterToSP.apply)
    xin = PT.seq_shard(x, rank, world).requires_grad_(True)
    with CommCounter() as c:
        z = row(torch.tanh(col(xin)))
        (z * PT.seq_shard(w, rank, world)).sum().backward()
    ref = fc2(torch.tanh(fc1(x)))
    return _max(z, PT.seq_shard(ref, rank, world)), col.bias, row.bias, dict(c.calls), xin.grad


def test_sequence_parallel_bias_free_layers_match_one_process():
    from solutions_lib.dist import probes_tp as PT
    res = launch(_sp_layers_rank, 2, timeout=60)
    (fc1, fc2), x, (_, w) = PT.seq_linear_case(4, [6, 8, 4], 2, 4, bias=False)
    xr = x.clone().requires_grad_(True)
    (fc2(torch.tanh(fc1(xr))) * w).sum().backward()
    for diff, b1, b2, calls, _ in res:
        assert diff < 1e-12 and b1 is None and b2 is None
        # forward: GatherFromSP's all-gather, ScatterToSP's reduce-scatter; backward: the other way round
        assert calls.get("all_gather_into_tensor", 0) + calls.get("all_gather_single", 0) == 2
        assert calls.get("reduce_scatter_tensor", 0) + calls.get("reduce_scatter_single", 0) == 2
    assert _max(torch.cat([r[4] for r in res], dim=1), xr.grad) < 1e-12
    assert torch.equal(PT.sum_shards([torch.ones(3), 2 * torch.ones(3)], "t"), 3 * torch.ones(3))
