"""Test machinery for assignment 11, exercises 1 (not an answer): the conjugate operators f and
g, the column- and row-parallel layers, the tensor-parallel MLP and block, the sequence-parallel
operators and the replicated-gradient sync, each run on `world` gloo ranks and compared with one
process running the whole thing (float64); the LayerNorm bytes of the course's block, measured;
and one-line checks of Part D's memory-optimal entry over `probes_tp`'s probes.

Each `check_*` grades ONE answer of the notebook; the test cell passes the answer and its own
cases (the hidden cells keep their seeds and shapes), so a test cell reads as a few lines:

    check_copy_to_tp(CopyToTP, 2, 0, (3, 4))                     # f: identity / all-reduce
    check_column(ColumnParallelLinear, globals(), 2, 0, [6, 8], 3, seq=4, sp=True)
    check_block(TensorParallelBlock, globals(), 2, dict(seed=0))
    check_sp_block(sync_replicated_grads, globals(), 2, dict(seed=0))

What is measured, on every rank: the values (outputs, input and parameter gradients, the shards
kept, re-assembled in rank order), the collectives of the forward and of the backward pass by
kind, calls and bytes (`CommCounter`), and that the answer's own code did the work
(`expect_own`; `no_delegation` around the rank's forward and backward: the course's TP code and
torch's differentiable collectives are off limits). A check that fails raises a GradingError
naming the rank, the case and what was expected (`launch_graded` re-raises a rank's error).

One slip costs one cell: everything upstream of the graded answer runs the course's stand-ins
(`tp_lab.upstream(namespace, ...)` binds them in the notebook's namespace, `globals()` of the
test cell, for the duration of the check; the forked ranks inherit them). The ranks are forked,
so the answers travel to them as they are (nothing is pickled).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..grading import expect_close, expect_equal, expect_own, no_delegation
from . import tp_lab as _tp_lab
from .counting import CommCounter
from .graded import launch_graded
from .probes_tp import expect_shape, seq_linear_case, seq_shard, sum_shards

__all__ = ["check_copy_to_tp", "check_reduce_from_tp", "check_gather_from_sp", "check_scatter_to_sp",
           "check_column", "check_row", "check_mlp", "check_block", "check_block_sp", "check_block_comm",
           "check_sp_block", "check_sync_comm", "layernorm_bytes_measured", "check_sp_entry_grads",
           "check_sp_entry_saved", "check_sp_entry_comm"]

_TOL = dict(rtol=1e-9, atol=1e-12)
_BLOCK_PARAMS = ("qkv.weight", "qkv.bias", "proj.weight", "proj.bias", "fc1.weight", "fc1.bias", "fc2.weight",
                 "fc2.bias", "ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias")
_REPLICATED = _tp_lab.REPLICATED
_by_kind, _cat = _tp_lab.by_kind, _tp_lab.cat_shards


# ---------------------------------------------------------------- what each answer may not call


def _ops_forbidden() -> tuple:
    """An operator (f, g, GatherFromSP, ScatterToSP) may not call the course's TP/SP code nor
    torch's differentiable collectives."""
    import torch.distributed.nn.functional as dist_nn_f

    from .. import parallel
    from . import tensor_parallel

    return (tensor_parallel, _tp_lab, parallel, dist_nn_f)


def _layer_forbidden() -> tuple:
    """A parallel layer may not be (or call) the course's layers or MLP."""
    from . import tensor_parallel as ref

    return (ref.ColumnParallelLinear, ref.RowParallelLinear, ref._SPColumnLinear.forward, ref.TensorParallelMLP,
            _tp_lab.ColumnParallelLinear, _tp_lab.RowParallelLinear)


def _block_forbidden() -> tuple:
    """The block may not be (or call) the course's block, attention, MLP or qkv reorder."""
    from . import tensor_parallel as ref

    return (ref.TensorParallelBlock, ref.TensorParallelAttention, ref.TensorParallelMLP,
            _tp_lab.TensorParallelBlock, _tp_lab.head_major_qkv)


# ---------------------------------------------------------------- Part A: f and g


def _op_data(world: int, seed: int, x_shape, w_shape):
    """One input and one loss weight per rank, float64, from one seeded generator (inputs first)."""
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(*x_shape, generator=g, dtype=torch.float64) for _ in range(world)]
    ws = [torch.randn(*w_shape, generator=g, dtype=torch.float64) for _ in range(world)]
    return xs, ws


def _op_rank(rank, world, op, task, xs, ws):
    """In a rank: y = op.apply(x_r), then the backward of sum(y * w_r), both inside
    no_delegation; y, x_r after the forward, dx_r and the collectives (forward, backward)."""
    x = xs[rank].clone().requires_grad_(True)
    with no_delegation(task, *_ops_forbidden()):
        with CommCounter() as fwd:
            y = op.apply(x)
        after = x.detach().clone()
        with CommCounter() as bwd:
            (y * ws[rank]).sum().backward()
    return y.detach().clone(), after, x.grad, _by_kind(fwd), _by_kind(bwd)


def _f_rank(rank, world, op, xs, ws):
    return _op_rank(rank, world, op, "f (CopyToTP)", xs, ws)


def _g_rank(rank, world, op, xs, ws):
    return _op_rank(rank, world, op, "g (ReduceFromTP)", xs, ws)


def _sp_rank(rank, world, op, op_name, xs, ws):
    return _op_rank(rank, world, op, op_name, xs, ws)


def _own_op(op, task: str) -> None:
    from .. import parallel
    from . import tensor_parallel as ref

    if task in ("GatherFromSP", "ScatterToSP"):
        expect_own(op, task, ref._GatherFromSP, ref._ScatterToSP)
    else:
        expect_own(op, task, parallel._CopyToTP, ref._ReduceFromTP)


def check_copy_to_tp(CopyToTP, world: int, seed: int, shape) -> None:
    """f on `world` ranks, inputs of `shape` drawn from `seed`: the identity forward (bit for
    bit), the gradient summed over the ranks backward, and no collective forward, one all_reduce
    of the whole gradient backward."""
    xs, ws = _op_data(world, seed, shape, shape)
    _own_op(CopyToTP, "f (CopyToTP)")
    out = launch_graded(_f_rank, world, args=(CopyToTP, xs, ws))
    nbytes = 8 * xs[0].numel()
    for r, (y, _, xg, fwd, bwd) in enumerate(out):
        expect_close(y, xs[r], f"f forward on rank {r} of {world}: the identity", rtol=0, atol=0)
        expect_close(xg, sum(ws), f"f backward on rank {r} of {world}: the gradient summed over the ranks",
                     rtol=1e-12, atol=1e-12, hint="backward must all-reduce (SUM) a copy of the incoming gradient.")
        expect_equal((fwd, bwd), ({}, {"all_reduce": (1, nbytes)}),
                     f"f on rank {r} of {world}: collectives (forward, backward) as {{kind: (calls, bytes)}}",
                     hint="No collective in the forward pass; one all_reduce of the whole gradient in the backward.")


def check_reduce_from_tp(ReduceFromTP, world: int, seed: int, shape) -> None:
    """g on `world` ranks: the sum over the ranks forward (its input left unchanged), the
    identity backward, one all_reduce forward and none backward."""
    xs, ws = _op_data(world, seed, shape, shape)
    _own_op(ReduceFromTP, "g (ReduceFromTP)")
    out = launch_graded(_g_rank, world, args=(ReduceFromTP, xs, ws))
    nbytes = 8 * xs[0].numel()
    for r, (y, after, xg, fwd, bwd) in enumerate(out):
        expect_close(y, sum(xs), f"g forward on rank {r} of {world}: the sum over the ranks", rtol=1e-12, atol=1e-12)
        expect_close(after, xs[r], f"g on rank {r} of {world}: its input after the forward pass (unchanged)",
                     rtol=0, atol=0, hint="all_reduce works in place: reduce a copy, not the input.")
        expect_close(xg, ws[r], f"g backward on rank {r} of {world}: the identity", rtol=0, atol=0,
                     hint="the output of g is the same on every rank, so is its gradient: pass it through.")
        expect_equal((fwd, bwd), ({"all_reduce": (1, nbytes)}, {}),
                     f"g on rank {r} of {world}: collectives (forward, backward) as {{kind: (calls, bytes)}}",
                     hint="One all_reduce in the forward pass, none in the backward.")


# ---------------------------------------------------------------- Part A: the parallel layers


def check_column(ColumnParallelLinear, namespace: dict, world: int, seed: int, sizes, batch: int, seq: int = 1,
                 bias: bool = True, sp: bool = False) -> None:
    """`ColumnParallelLinear(Linear(*sizes, bias))` on `world` ranks, under the course's f and g
    (and, with `sp`, `enter=GatherFromSP` on each rank's sequence shard): the weight and bias
    shards it keeps, the outputs side by side, the input, weight and bias gradients, and the
    collectives of each pass against the full layer in one process."""
    (layer,), x, (w,) = seq_linear_case(seed, sizes, batch, seq, bias)
    y_ref, xg_ref, g_ref = _tp_lab.one_process(layer, x, w)
    expect_own(ColumnParallelLinear, "ColumnParallelLinear", *_layer_forbidden())
    with _tp_lab.upstream(namespace, "CopyToTP", "ReduceFromTP"):      # the course's f and g under the layer
        res = launch_graded(_col_rank, world, args=(ColumnParallelLinear, seed, sizes, batch, seq, bias, sp))
    tag = (f"Linear({sizes[0]}, {sizes[1]}{'' if bias else ', bias=False'}) on {world} ranks"
           f"{', enter=GatherFromSP on a sequence shard' if sp else ''}")
    expect_close(_cat([r["held"][0] for r in res], 0, "weight shards"), layer.weight.detach(),
                 f"{tag}: the ranks' weight shards stacked in rank order (dim 0) vs W", rtol=0, atol=0,
                 hint="rank r keeps the rows [r k, (r+1) k) of W (out_features x in_features), k = out_features / world.")
    if bias:
        expect_close(_cat([r["held"][1] for r in res], 0, "bias shards"), layer.bias.detach(),
                     f"{tag}: the bias shards stacked vs b", rtol=0, atol=0)
    else:
        expect_equal([r["held"][1] is None for r in res], [True] * world, f"{tag}: self.bias is None on every rank",
                     hint="a layer without bias (linear.bias is None) keeps self.bias = None.")
    expect_close(_cat([r["y"] for r in res], -1, "outputs"), y_ref,
                 f"{tag}: the ranks' outputs side by side (last dim) vs the full layer", **_TOL,
                 hint="enter(x) W_r^T + b_r: with enter = GatherFromSP the input is the rank's sequence shard and "
                      "the output has all s tokens." if sp else "")
    if sp:
        expect_close(_cat([r["xg"] for r in res], 1, "input gradients"), xg_ref,
                     f"{tag}: the ranks' input gradients concatenated along the sequence vs one process", **_TOL,
                     hint="apply the enter operator you were given to the input: GatherFromSP's backward reduce-scatters dX.")
    else:
        for r, rr in enumerate(res):
            expect_close(rr["xg"], xg_ref, f"{tag}: input gradient on rank {r} vs one process", **_TOL,
                         hint="apply the enter operator (f by default) to the input: its backward sums the ranks' terms.")
    expect_close(_cat([r["wg"] for r in res], 0, "weight gradients"), g_ref["weight"],
                 f"{tag}: weight-gradient shards stacked vs the full weight gradient", **_TOL)
    if bias:
        expect_close(_cat([r["bg"] for r in res], 0, "bias gradients"), g_ref["bias"],
                     f"{tag}: bias-gradient shards stacked vs the full bias gradient", **_TOL)
    nb_ = 8 * x.numel()
    want = ({"all_gather": (1, nb_)}, {"reduce_scatter": (1, nb_)}) if sp else ({}, {"all_reduce": (1, nb_)})
    for r, rr in enumerate(res):
        expect_equal((rr["fwd"], rr["bwd"]), want,
                     f"{tag}, rank {r}: collectives (forward, backward) as {{kind: (calls, bytes)}}",
                     hint="the column-parallel layer communicates only through its enter operator: f (nothing forward, "
                          "one all_reduce of dX backward) or GatherFromSP (one all-gather forward, one reduce-scatter backward).")


def _col_rank(rank, world, ColumnParallelLinear, seed, sizes, batch, seq, bias, sp):
    (layer,), x, (w,) = seq_linear_case(seed, sizes, batch, seq, bias)
    k = sizes[1] // world
    with no_delegation("ColumnParallelLinear", *_layer_forbidden()):
        col = ColumnParallelLinear(layer, enter=_tp_lab.GatherFromSP.apply) if sp else ColumnParallelLinear(layer)
        held = col.weight.detach().clone(), None if col.bias is None else col.bias.detach().clone()
        xin = (seq_shard(x, rank, world) if sp else x.clone()).requires_grad_(True)
        with CommCounter() as fwd:
            y = col(xin)
        expect_shape(y, (batch, seq, k), f"the output on rank {rank} of {world}"
                     f"{' (enter=GatherFromSP, input the sequence shard)' if sp else ''}",
                     "a column-parallel layer returns all s tokens of its k = out_features / world features.")
        with CommCounter() as bwd:
            (y * w[..., rank * k:(rank + 1) * k]).sum().backward()
    return dict(held=held, y=y.detach(), xg=xin.grad, wg=col.weight.grad, bg=None if col.bias is None else col.bias.grad,
                fwd=_by_kind(fwd), bwd=_by_kind(bwd))


def check_row(RowParallelLinear, namespace: dict, world: int, seed: int, sizes, batch: int, seq: int = 1,
              bias: bool = True, sp: bool = False) -> None:
    """`RowParallelLinear(Linear(*sizes, bias))` on `world` ranks, each given its slice of the
    input features, under the course's f and g (with `sp`, `exit=ScatterToSP`): the weight
    shards and the whole bias kept, the output (whole on every rank, or the sequence shards
    concatenated), the gradients and the collectives of each pass against one process."""
    (layer,), x, (w,) = seq_linear_case(seed, sizes, batch, seq, bias)
    y_ref, xg_ref, g_ref = _tp_lab.one_process(layer, x, w)
    expect_own(RowParallelLinear, "RowParallelLinear", *_layer_forbidden())
    with _tp_lab.upstream(namespace, "CopyToTP", "ReduceFromTP"):
        res = launch_graded(_row_rank, world, args=(RowParallelLinear, seed, sizes, batch, seq, bias, sp))
    tag = (f"Linear({sizes[0]}, {sizes[1]}{'' if bias else ', bias=False'}) on {world} ranks"
           f"{', exit=ScatterToSP' if sp else ''}")
    expect_close(_cat([r["held"][0] for r in res], 1, "weight shards"), layer.weight.detach(),
                 f"{tag}: the ranks' weight shards side by side (dim 1) vs W", rtol=0, atol=0,
                 hint="rank r keeps the columns [r k, (r+1) k) of W, k = in_features / world.")
    if sp:
        expect_close(_cat([r["y"] for r in res], 1, "outputs"), y_ref,
                     f"{tag}: the ranks' output shards concatenated along the sequence vs the full layer", **_TOL,
                     hint="exit(x_r W_r^T) + b: with exit = ScatterToSP each rank gets its s/t tokens of the sum; "
                          "add the bias after the exit, once.")
        if bias:
            expect_close(sum_shards([r["bg"] for r in res], "bias gradients"), g_ref["bias"],
                         f"{tag}: the ranks' bias gradients added up vs the full bias gradient", **_TOL,
                         hint="each rank adds b to its own tokens, so its bias gradient is the sum over its tokens.")
    for r, rr in enumerate(res):
        if bias:
            expect_close(rr["held"][1], layer.bias.detach(), f"{tag}: the bias kept on rank {r} (the whole b)",
                         rtol=0, atol=0)
        else:
            expect_equal(rr["held"][1] is None, True, f"{tag}: self.bias is None on rank {r}",
                         hint="a layer without bias (linear.bias is None) keeps self.bias = None.")
        if not sp:
            expect_close(rr["y"], y_ref, f"{tag}: output on rank {r} vs the full layer", **_TOL,
                         hint="sum the partial products over the ranks (exit = g), then add the bias once.")
            if bias:
                expect_close(rr["bg"], g_ref["bias"], f"{tag}: bias gradient on rank {r}", **_TOL)
    expect_close(_cat([r["xg"] for r in res], -1, "input gradients"), xg_ref,
                 f"{tag}: the ranks' input gradients side by side vs one process", **_TOL)
    expect_close(_cat([r["wg"] for r in res], 1, "weight gradients"), g_ref["weight"],
                 f"{tag}: weight-gradient shards side by side vs the full weight gradient", **_TOL)
    nb_ = 8 * y_ref.numel()
    want = ({"reduce_scatter": (1, nb_)}, {"all_gather": (1, nb_)}) if sp else ({"all_reduce": (1, nb_)}, {})
    for r, rr in enumerate(res):
        expect_equal((rr["fwd"], rr["bwd"]), want,
                     f"{tag}, rank {r}: collectives (forward, backward) as {{kind: (calls, bytes)}}",
                     hint="the row-parallel layer communicates only through its exit operator: g (one all_reduce "
                          "forward, none backward) or ScatterToSP (one reduce-scatter forward, one all-gather backward).")


def _row_rank(rank, world, RowParallelLinear, seed, sizes, batch, seq, bias, sp):
    (layer,), x, (w,) = seq_linear_case(seed, sizes, batch, seq, bias)
    k = sizes[0] // world
    with no_delegation("RowParallelLinear", *_layer_forbidden()):
        row = RowParallelLinear(layer, exit=_tp_lab.ScatterToSP.apply) if sp else RowParallelLinear(layer)
        held = row.weight.detach().clone(), None if row.bias is None else row.bias.detach().clone()
        xin = x[..., rank * k:(rank + 1) * k].clone().requires_grad_(True)
        with CommCounter() as fwd:
            y = row(xin)
        expect_shape(y, (batch, seq // world if sp else seq, sizes[1]), f"the output on rank {rank} of {world}"
                     f"{' (exit=ScatterToSP)' if sp else ''}",
                     "with exit = ScatterToSP each rank returns its s/t tokens of the summed output; with g all s.")
        with CommCounter() as bwd:
            (y * (seq_shard(w, rank, world) if sp else w)).sum().backward()
    return dict(held=held, y=y.detach(), xg=xin.grad, wg=row.weight.grad, bg=None if row.bias is None else row.bias.grad,
                fwd=_by_kind(fwd), bwd=_by_kind(bwd))


def check_mlp(ColumnParallelLinear, RowParallelLinear, namespace: dict, world: int, seed: int, sizes, batch: int) -> None:
    """Column -> GeLU -> row (`Linear(sizes[0], sizes[1])`, `Linear(sizes[1], sizes[2])`) on
    `world` ranks under the course's f and g: the output and every gradient against one process,
    one all-reduce of Z forward and one of dX backward, nothing else."""
    (fc1, fc2), x, (_, w) = _tp_lab.linear_case(seed, sizes, batch)
    z_ref, xg_ref, g_ref = _tp_lab.one_process(nn.Sequential(fc1, nn.GELU(), fc2), x, w)
    with _tp_lab.upstream(namespace, "CopyToTP", "ReduceFromTP"):
        res = launch_graded(_mlp_rank, world, args=(ColumnParallelLinear, RowParallelLinear, seed, sizes, batch))
    tag = f"MLP {sizes} on {world} ranks"
    for r, rr in enumerate(res):
        expect_close(rr["z"], z_ref, f"{tag}: output on rank {r} vs one process", **_TOL)
        expect_close(rr["xg"], xg_ref, f"{tag}: input gradient on rank {r} vs one process", **_TOL)
        expect_close(rr["b2"], g_ref["2.bias"], f"{tag}: second bias gradient on rank {r}", **_TOL)
    expect_close(_cat([r["w1"] for r in res], 0, "first weight gradients"), g_ref["0.weight"],
                 f"{tag}: first (column-parallel) weight gradient, gathered", **_TOL)
    expect_close(_cat([r["b1"] for r in res], 0, "first bias gradients"), g_ref["0.bias"],
                 f"{tag}: first bias gradient, gathered", **_TOL)
    expect_close(_cat([r["w2"] for r in res], 1, "second weight gradients"), g_ref["2.weight"],
                 f"{tag}: second (row-parallel) weight gradient, gathered", **_TOL)
    for r, rr in enumerate(res):
        expect_equal((rr["fwd"], rr["bwd"]), ({"all_reduce": (1, 8 * z_ref.numel())}, {"all_reduce": (1, 8 * x.numel())}),
                     f"{tag}, rank {r}: collectives (forward, backward) as {{kind: (calls, bytes)}}",
                     hint="column then row: g's all-reduce of Z forward, f's all-reduce of dX backward, nothing else.")


def _mlp_rank(rank, world, ColumnParallelLinear, RowParallelLinear, seed, sizes, batch):
    (fc1, fc2), x, (_, w) = _tp_lab.linear_case(seed, sizes, batch)
    with no_delegation("column then row parallel MLP", *_layer_forbidden()):
        col, row = ColumnParallelLinear(fc1), RowParallelLinear(fc2)
        xin = x.clone().requires_grad_(True)
        with CommCounter() as fwd:
            z = row(F.gelu(col(xin)))
        with CommCounter() as bwd:
            (z * w).sum().backward()
    return dict(z=z.detach(), xg=xin.grad, w1=col.weight.grad, b1=col.bias.grad, w2=row.weight.grad,
                b2=row.bias.grad, fwd=_by_kind(fwd), bwd=_by_kind(bwd))


# ---------------------------------------------------------------- Part B: the block


def _block_rank(rank, world, TensorParallelBlock, case, sp=False, shape_check=True):
    """In a rank: the block built from `tp_lab.block_case(**case)` (with `sp`, the course's
    sequence-parallel enter/exit on the rank's sequence shard), one forward and backward inside
    no_delegation; the output, dx, every parameter's gradient and the collectives."""
    block, x, w = _tp_lab.block_case(**case)
    mask = _tp_lab.causal_mask(x.shape[1])
    with no_delegation("TensorParallelBlock", *_block_forbidden()):
        if sp:                                 # the course's sequence-parallel operators, on a sequence shard
            tp = TensorParallelBlock(block, enter=_tp_lab.GatherFromSP.apply, exit=_tp_lab.ScatterToSP.apply)
            x, w = seq_shard(x, rank, world), seq_shard(w, rank, world)
        else:
            tp = TensorParallelBlock(block)
        xin = x.clone().requires_grad_(True)
        with CommCounter() as fwd:
            out = tp(xin, mask)
        if shape_check:
            expect_shape(out, tuple(x.shape), f"the block's output on rank {rank} of {world}"
                         f"{' (sequence-parallel enter/exit, input the sequence shard)' if sp else ''}",
                         "the block returns the shape of its input x: pass enter to qkv and fc1, exit to proj and fc2.")
        with CommCounter() as bwd:
            (out * w).sum().backward()
    grads = {}
    for n in _BLOCK_PARAMS:
        mod, attr = n.split(".")
        p = getattr(getattr(tp, mod, None), attr, None)
        grads[n] = None if p is None or p.grad is None else p.grad.detach()
    return dict(out=out.detach(), xg=xin.grad, grads=grads, fwd=_by_kind(fwd), bwd=_by_kind(bwd))


def _run_block(TensorParallelBlock, namespace, world, case, sp=False, shape_check=True):
    expect_own(TensorParallelBlock, "TensorParallelBlock", *_block_forbidden())
    with _tp_lab.upstream(namespace, "CopyToTP", "ReduceFromTP", "ColumnParallelLinear", "RowParallelLinear"):
        return launch_graded(_block_rank, world, args=(TensorParallelBlock, case, sp, shape_check))


def _block_ref(case):
    block, x, w = _tp_lab.block_case(**case)
    return _tp_lab.one_process(block, x, w, _tp_lab.causal_mask(x.shape[1]))


def check_block(TensorParallelBlock, namespace: dict, world: int, case: dict) -> None:
    """The block of `tp_lab.block_case(**case)` on `world` ranks with f/g, the course's layers
    under it: the same output and input gradient on every rank, the replicated parameters'
    gradients on every rank, the sharded ones gathered, against the one-process block."""
    out_ref, xg_ref, g_ref = _block_ref(case)
    res = _run_block(TensorParallelBlock, namespace, world, case)
    tag = f"block h={case.get('hidden', 16)}, a={case.get('heads', 4)} on {world} ranks"
    for r, rr in enumerate(res):
        expect_close(rr["out"], out_ref, f"{tag}: output on rank {r} vs one process", **_TOL,
                     hint="same output on every rank: check the [Q_r; K_r; V_r] reorder of qkv, the heads per rank, the 1/sqrt(d) scale, the mask and the residuals.")
        expect_close(rr["xg"], xg_ref, f"{tag}: input gradient on rank {r} vs one process", **_TOL)
        for n in _REPLICATED:
            expect_close(rr["grads"][n], g_ref[n], f"{tag}: gradient of the replicated {n} on rank {r}", **_TOL)
    for n in ("qkv.weight", "qkv.bias"):
        expect_close(_cat([rr["grads"][n] for rr in res], 0, n, qkv=True), g_ref[n],
                     f"{tag}: {n} gradient gathered from the ranks' [Q_r; K_r; V_r] shards", **_TOL,
                     hint="rank r's qkv must hold rows [r k, (r+1) k) of each of Q, K, V (k = h / world), in that order.")
    for n in ("fc1.weight", "fc1.bias"):
        expect_close(_cat([rr["grads"][n] for rr in res], 0, n), g_ref[n], f"{tag}: {n} gradient gathered (dim 0)", **_TOL)
    for n in ("proj.weight", "fc2.weight"):
        expect_close(_cat([rr["grads"][n] for rr in res], 1, n), g_ref[n], f"{tag}: {n} gradient gathered (dim 1)", **_TOL)


def check_block_sp(TensorParallelBlock, namespace: dict, world: int, case: dict) -> None:
    """The same block on each rank's sequence shard with the course's GatherFromSP/ScatterToSP
    as enter/exit: output and input-gradient shards concatenated along the sequence, the
    replicated parameters' partial gradients added up, the sharded ones gathered."""
    out_ref, xg_ref, g_ref = _block_ref(case)
    res = _run_block(TensorParallelBlock, namespace, world, case, sp=True)
    tag = f"block h={case.get('hidden', 16)}, a={case.get('heads', 4)} on {world} ranks, sequence-parallel enter/exit"
    expect_close(_cat([rr["out"] for rr in res], 1, "outputs"), out_ref,
                 f"{tag}: output shards concatenated along the sequence vs one process", **_TOL,
                 hint="on a sequence shard x is (b, s/t, h) while Q, K, V after qkv hold all s tokens: take b and s "
                      "from q, not from x; pass enter to qkv and fc1, exit to proj and fc2.")
    expect_close(_cat([rr["xg"] for rr in res], 1, "input gradients"), xg_ref,
                 f"{tag}: input-gradient shards concatenated along the sequence vs one process", **_TOL)
    for n in _REPLICATED:
        expect_close(sum_shards([rr["grads"][n] for rr in res], n), g_ref[n],
                     f"{tag}: the ranks' gradients of the replicated {n} added up (each over its own tokens)", **_TOL)
    for n in ("qkv.weight", "qkv.bias"):
        expect_close(_cat([rr["grads"][n] for rr in res], 0, n, qkv=True), g_ref[n],
                     f"{tag}: {n} gradient gathered from the ranks' [Q_r; K_r; V_r] shards", **_TOL)
    for n in ("fc1.weight", "proj.weight"):
        expect_close(_cat([rr["grads"][n] for rr in res], 0 if n == "fc1.weight" else 1, n), g_ref[n],
                     f"{tag}: {n} gradient gathered", **_TOL)


def check_block_comm(TensorParallelBlock, namespace: dict, world: int, case: dict) -> None:
    """The block with f/g moves 2 all-reduces of b*s*h float64 values forward and 2 backward
    on every rank (one fused qkv: three column layers for Q, K, V would make it 4)."""
    b, s, h = case.get("batch", 2), case.get("seq_len", 8), case.get("hidden", 16)
    nbytes = 8 * b * s * h                      # float64 activations of the whole block
    for r, rr in enumerate(_run_block(TensorParallelBlock, namespace, world, case, shape_check=False)):
        expect_equal((rr["fwd"], rr["bwd"]), ({"all_reduce": (2, 2 * nbytes)}, {"all_reduce": (2, 2 * nbytes)}),
                     f"block on {world} ranks, rank {r}: collectives (forward, backward) as {{kind: (calls, bytes)}}",
                     hint="one f before the fused qkv and one before fc1 (backward), one g after proj and one after fc2 "
                          "(forward): 2 all-reduces of b*s*h values each way. Three column layers for Q, K, V would be 4.")


# ---------------------------------------------------------------- Part C: the sequence-parallel operators


def check_gather_from_sp(GatherFromSP, world: int, seed: int, b: int, s: int, h: int) -> None:
    """GatherFromSP on `world` ranks, each with its s/t tokens of (b, s, h): all s tokens in rank
    order forward, this rank's tokens of the summed gradient backward; one all-gather forward,
    one reduce-scatter backward (bytes of the full buffer)."""
    xs, ws = _op_data(world, seed, (b, s // world, h), (b, s, h))    # each rank: its s/t tokens in, all s out
    _own_op(GatherFromSP, "GatherFromSP")
    res = launch_graded(_sp_rank, world, args=(GatherFromSP, "GatherFromSP", xs, ws))
    full, nbytes = torch.cat(xs, dim=1), 8 * b * s * h
    k = s // world
    for r, (y, after, xg, fwd, bwd) in enumerate(res):
        tag = f"GatherFromSP on rank {r} of {world}, (b, s, h) = {(b, s, h)}"
        expect_close(y, full, f"{tag}: forward = the ranks' shards concatenated along dim 1", rtol=0, atol=0,
                     hint="gather along the sequence (dim 1), in rank order.")
        expect_close(xg, sum(ws)[:, r * k:(r + 1) * k], f"{tag}: backward = this rank's tokens of the gradient summed over ranks",
                     rtol=1e-12, atol=1e-12, hint="reduce-scatter (SUM) the incoming gradient along dim 1.")
        expect_equal((fwd, bwd), ({"all_gather": (1, nbytes)}, {"reduce_scatter": (1, nbytes)}),
                     f"{tag}: collectives (forward, backward) as {{kind: (calls, bytes of the full buffer)}}",
                     hint="one all-gather forward, one reduce-scatter backward.")


def check_scatter_to_sp(ScatterToSP, world: int, seed: int, b: int, s: int, h: int) -> None:
    """ScatterToSP on `world` ranks, each with a partial sum of all s tokens: this rank's tokens
    of the sum forward (its input unchanged), the gradient shards concatenated backward; one
    reduce-scatter forward, one all-gather backward."""
    xs, ws = _op_data(world, seed, (b, s, h), (b, s // world, h))    # each rank: a partial sum of all s tokens in
    _own_op(ScatterToSP, "ScatterToSP")
    res = launch_graded(_sp_rank, world, args=(ScatterToSP, "ScatterToSP", xs, ws))
    total, nbytes, k = sum(xs), 8 * b * s * h, s // world
    for r, (y, after, xg, fwd, bwd) in enumerate(res):
        tag = f"ScatterToSP on rank {r} of {world}, (b, s, h) = {(b, s, h)}"
        expect_close(y, total[:, r * k:(r + 1) * k], f"{tag}: forward = this rank's tokens of the sum over ranks",
                     rtol=1e-12, atol=1e-12, hint="reduce-scatter (SUM) along dim 1: rank r keeps tokens [r s/t, (r+1) s/t).")
        expect_close(after, xs[r], f"{tag}: its input after the forward pass (unchanged)", rtol=0, atol=0)
        expect_close(xg, torch.cat(ws, dim=1), f"{tag}: backward = the ranks' gradient shards concatenated along dim 1",
                     rtol=0, atol=0, hint="all-gather the incoming gradient along the sequence.")
        expect_equal((fwd, bwd), ({"reduce_scatter": (1, nbytes)}, {"all_gather": (1, nbytes)}),
                     f"{tag}: collectives (forward, backward) as {{kind: (calls, bytes of the full buffer)}}",
                     hint="one reduce-scatter forward, one all-gather backward.")


# ---------------------------------------------------------------- Part C: the replicated gradients


def _sp_block_rank(rank, world, sync_replicated_grads, namespace, case):
    """In a rank: the course's block (the stand-ins bound in `namespace`) on the rank's sequence
    shard, forward and backward, then the answer's sync inside no_delegation."""
    block, x, w = _tp_lab.block_case(**case)
    s = x.shape[1]
    lo, hi = rank * s // world, (rank + 1) * s // world
    tp = namespace["TensorParallelBlock"](block, enter=namespace["GatherFromSP"].apply,
                                          exit=namespace["ScatterToSP"].apply)
    xin = x[:, lo:hi].clone().requires_grad_(True)
    out = tp(xin, _tp_lab.causal_mask(s))
    (out * w[:, lo:hi]).sum().backward()
    from . import tensor_parallel as ref
    with no_delegation("sync_replicated_grads", ref.TensorParallelBlock.allreduce_replicated_grads,
                       _tp_lab.sync_replicated_grads), CommCounter() as sync:
        sync_replicated_grads(tp)
    grads = {n: tp.get_parameter(n).grad for n in _REPLICATED}
    return dict(out=out.detach(), xg=xin.grad, grads=grads, sync=_by_kind(sync))


def _run_sp_block(sync_replicated_grads, namespace, world, case):
    expect_own(sync_replicated_grads, "sync_replicated_grads", _tp_lab.sync_replicated_grads)
    with _tp_lab.upstream(namespace, "CopyToTP", "ReduceFromTP", "GatherFromSP", "ScatterToSP",
                          "ColumnParallelLinear", "RowParallelLinear", "TensorParallelBlock"):
        return launch_graded(_sp_block_rank, world, args=(sync_replicated_grads, namespace, case))


def check_sp_block(sync_replicated_grads, namespace: dict, world: int, case: dict) -> None:
    """The course's sequence-parallel block on `world` ranks, then the answer's sync: the output
    shards, and every replicated parameter's gradient on every rank equal to one process."""
    out_ref, xg_ref, g_ref = _block_ref(case)
    res = _run_sp_block(sync_replicated_grads, namespace, world, case)
    tag = f"sequence-parallel block on {world} ranks"
    expect_close(_cat([r["out"] for r in res], 1, "outputs"), out_ref,
                 f"{tag}: output shards concatenated along the sequence vs one process", **_TOL)
    for r, rr in enumerate(res):
        for n in _REPLICATED:
            expect_close(rr["grads"][n], g_ref[n], f"{tag}: gradient of {n} on rank {r} after sync_replicated_grads", **_TOL,
                         hint="each rank holds the sum over its own tokens only: all-reduce (SUM) them, do not average.")


def check_sync_comm(sync_replicated_grads, namespace: dict, world: int, case: dict) -> None:
    """The sync is one all_reduce of the six replicated gradients flattened together (6 h
    float64 values) on every rank."""
    h = case.get("hidden", 16)
    for r, rr in enumerate(_run_sp_block(sync_replicated_grads, namespace, world, case)):
        expect_equal(rr["sync"], {"all_reduce": (1, 8 * 6 * h)},
                     f"sync_replicated_grads on rank {r} of {world}: collectives as {{kind: (calls, bytes)}}",
                     hint="one all_reduce of the six gradients flattened together: 6 h float64 values.")


# ---------------------------------------------------------------- Part C: LayerNorm activations, measured


def _measure(rank, world, sp, case):
    # the course's blocks (not the student's): what the two LayerNorms of one layer save on this rank
    block, x, _ = _tp_lab.block_case(**case)
    s = x.shape[1]
    lo, hi = (rank * s // world, (rank + 1) * s // world) if sp else (0, s)
    ops = dict(enter=_tp_lab.GatherFromSP.apply, exit=_tp_lab.ScatterToSP.apply) if sp else {}
    tp = _tp_lab.TensorParallelBlock(block, **ops)
    return _tp_lab.layernorm_saved_bytes(tp, x[:, lo:hi].clone().requires_grad_(True), _tp_lab.causal_mask(s))


def layernorm_bytes_measured(world: int, sp: bool, case: dict) -> int:
    """The bytes the two LayerNorms of the course's block (`tp_lab.block_case(**case)`) save for
    backward on rank 0 of `world`, with (sp) or without sequence parallelism: measured, not
    computed (`tp_lab.layernorm_saved_bytes`)."""
    from .launch import launch

    return launch(_measure, world, args=(sp, case))[0]


# ---------------------------------------------------------------- Part D: the memory-optimal entry (probes_tp)


def check_sp_entry_grads(SPColumnLinear, world: int, **case) -> None:
    """The answer's SPColumnLinear on every rank's shards (the course's TP code forbidden): its
    output and every gradient against one process (`probes_tp.expect_sp_column_grads`)."""
    from . import probes_tp

    probes_tp.expect_sp_column_grads(probes_tp.launch_sp_column(SPColumnLinear, world, case), world, case)


def check_sp_entry_saved(SPColumnLinear, world: int, **case) -> tuple[int, int]:
    """The bytes each rank keeps for backward, measured with saved-tensor hooks and on ctx, at
    most 1/t of what F.linear(GatherFromSP(x)) keeps (`probes_tp.expect_sp_column_saved`).
    Returns (kept by the answer, kept by the naive composition) on rank 0."""
    from . import probes_tp

    res = probes_tp.launch_sp_column(SPColumnLinear, world, case)
    probes_tp.expect_sp_column_saved(res, world, case)
    return res[0]["saved"], res[0]["naive"]


def check_sp_entry_comm(SPColumnLinear, world: int, entry: dict, layer: dict) -> None:
    """The piece alone (1 all-gather forward, 1 all-gather + 1 reduce-scatter backward), then the
    course's SP layer with the answer as its qkv and fc1 (6 all-gathers + 4 reduce-scatters)."""
    from . import probes_tp

    probes_tp.expect_sp_column_comm(probes_tp.launch_sp_column(SPColumnLinear, world, entry), world, entry)
    probes_tp.expect_sp_layer_comm(probes_tp.launch_sp_layer(SPColumnLinear, world, layer), world, layer)
