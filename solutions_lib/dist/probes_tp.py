"""Test machinery for assignment 11, exercises 1 (not an answer): sequence-parallel and bias-free
cases for the student's own column/row-parallel layers and block.

The layers of Part A take `enter`/`exit` operators so that Part C can plug in the
sequence-parallel twins of f and g; the block of Part B passes them on. These helpers make the
cases that exercise those paths in the layers' and the block's own test cells (with the course's
operators from `tp_lab`, so one slip costs one cell):

    (layer,), x, (w,) = seq_linear_case(seed, [n_in, n_out], batch, seq_len, bias=False)
    shard = seq_shard(x, rank, world)                   # tokens [r s/t, (r+1) s/t) of dim 1
    total = sum_shards(parts, "bias gradients")         # partial sums from the ranks, added up

A column-parallel layer under SP takes the rank's sequence shard (b, s/t, n_in), all-gathers it
and returns all s tokens of its output features; a row-parallel layer takes all s tokens of its
input features and returns its sequence shard of the summed output (reduce-scatter), the bias
added to that shard, so each rank's bias gradient is a partial sum over its own tokens.

Part D, the memory-optimal sequence-parallel entry `fn(x_shard, W_r, b_r)` (all-gather along the
sequence, then the column-parallel product; Korthikanti et al. 2022, sec. 4.2.2), is measured
from outside the student's code:

    res = launch_sp_column(SPColumnLinear, world, case)  # run_sp_column on every rank
    expect_sp_column_grads(res, world, case)            # output, dX, dW, db against one process
    expect_sp_column_saved(res, world, case)            # bytes kept for backward <= naive / t
    expect_sp_column_comm(res, world, case)             # 1 AG forward, 1 AG + 1 RS backward
    expect_sp_layer_comm(launch_sp_layer(SPColumnLinear, world, layer_case), world, layer_case)
                                                        # a whole SP layer: 6 AG + 4 RS

`SavedBytes` counts what the forward keeps for backward: the storages autograd's saved-tensor
hooks see (`ctx.save_for_backward`, built-in ops) and tensors kept as attributes of a custom
Function's ctx (which no hook sees), each storage once, the parameters left out.
"""
from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["seq_linear_case", "seq_shard", "sum_shards", "expect_shape", "SavedBytes", "run_sp_column",
           "run_sp_layer", "launch_sp_column", "launch_sp_layer", "expect_sp_column_grads",
           "expect_sp_column_saved", "expect_sp_column_comm", "expect_sp_layer_comm"]


def seq_linear_case(seed: int, sizes, batch: int = 2, seq_len: int = 4, bias: bool = True,
                    dtype=torch.float64):
    """Seeded nn.Linear layers of `sizes` (with or without bias), an input (batch, seq_len,
    sizes[0]) and a loss weight (batch, seq_len, n_out) per layer (loss = sum(out * w))."""
    torch.manual_seed(seed)
    layers = [nn.Linear(i, o, bias=bias).to(dtype) for i, o in zip(sizes[:-1], sizes[1:])]
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, seq_len, sizes[0], generator=g, dtype=dtype)
    ws = [torch.randn(batch, seq_len, o, generator=g, dtype=dtype) for o in sizes[1:]]
    return layers, x, ws


def seq_shard(x: torch.Tensor, rank: int, world: int, dim: int = 1) -> torch.Tensor:
    """This rank's tokens [r s/t, (r+1) s/t) along `dim` (a copy)."""
    s = x.shape[dim]
    k = s // world
    return x.narrow(dim, rank * k, k).clone()


def sum_shards(parts, what: str) -> torch.Tensor:
    """The ranks' partial sums added up; a missing one (None) or mismatched shapes fail with a
    GradingError that names `what`."""
    from ..grading import GradingError

    if any(p is None for p in parts):
        ranks = [r for r, p in enumerate(parts) if p is None]
        raise GradingError(f"{what}: ranks {ranks} returned None (a parameter without a gradient? "
                           "check that the layer's tensors are nn.Parameters used in the forward).")
    shapes = {tuple(p.shape) for p in parts}
    if len(shapes) != 1:
        raise GradingError(f"{what}: the ranks' tensors have different shapes {sorted(shapes)}")
    return torch.stack([p.detach() for p in parts]).sum(0)


def expect_shape(t, shape, what: str, hint: str = "") -> None:
    """In a rank, before the test uses `t`: a GradingError (re-raised in the notebook by
    `launch_graded`) when `t` is not a tensor of `shape`, instead of a broadcasting error in the
    test's own code."""
    from ..grading import GradingError

    got = tuple(t.shape) if hasattr(t, "shape") else type(t).__name__
    if got != tuple(shape):
        raise GradingError(f"{what}: expected shape {tuple(shape)}, got {got}.{' ' + hint if hint else ''}")


# ---------------------------------------------------------------- Part D: the memory-optimal SP entry

_TOL = dict(rtol=1e-9, atol=1e-12)


def _tensors_in(obj, depth: int = 0):
    """The tensors in `obj`, looking into lists, tuples, sets and dict values (3 levels deep)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 3 and isinstance(obj, (list, tuple, set)):
        for o in obj:
            yield from _tensors_in(o, depth + 1)
    elif depth < 3 and isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors_in(o, depth + 1)


class SavedBytes:
    """`with SavedBytes(*params) as saved: y = fn(...)`, then `saved.add_graph(y)`:
    `saved.total` is the bytes of the distinct storages kept for backward (saved-tensor hooks,
    plus tensors held as attributes of custom Functions' ctx in `y`'s graph), leaving out the
    storages of `params` (None entries ignored)."""

    def __init__(self, *skip):
        self._skip = {t.untyped_storage().data_ptr() for t in skip if t is not None}
        self._seen: dict[int, int] = {}
        self._hooks = None

    def _add(self, t: torch.Tensor) -> None:
        st = t.untyped_storage()
        if st.data_ptr() not in self._skip:
            self._seen[st.data_ptr()] = st.nbytes()

    def __enter__(self) -> "SavedBytes":
        def pack(t):
            self._add(t)
            return t

        self._hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        self._hooks.__exit__(*exc)
        return False

    def add_graph(self, out) -> None:
        """Add the tensors that custom Functions in `out`'s backward graph keep as ctx attributes."""
        stack, seen = [getattr(out, "grad_fn", None)], set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            for t in _tensors_in(list(getattr(node, "__dict__", {}).values())):
                self._add(t)
            stack.extend(fn for fn, _ in getattr(node, "next_functions", ()))

    @property
    def total(self) -> int:
        return int(sum(self._seen.values()))


def _naive_saved_bytes(x_shard, weight, bias) -> int:
    """What `F.linear(GatherFromSP(x_shard), W_r, b_r)` keeps for backward (the course's
    operator): the gathered input, (b, s, n_in)."""
    import torch.nn.functional as F

    from .tp_lab import GatherFromSP

    x = x_shard.detach().clone().requires_grad_(True)
    with SavedBytes(weight, bias) as saved:
        y = F.linear(GatherFromSP.apply(x), weight, bias)
    saved.add_graph(y)
    return saved.total


def _sp_column_case(case: dict, rank: int, world: int):
    sizes = case["sizes"]
    (layer,), x, (w,) = seq_linear_case(case["seed"], sizes, case["batch"], case["seq"], case.get("bias", True))
    k = sizes[1] // world
    rows = slice(rank * k, (rank + 1) * k)
    weight = nn.Parameter(layer.weight.detach()[rows].clone())
    bias = nn.Parameter(layer.bias.detach()[rows].clone()) if layer.bias is not None else None
    return layer, x, w[..., rows], weight, bias


def run_sp_column(fn, rank: int, world: int, case: dict, forbidden=()) -> dict:
    """In a rank: the rank's rows of a seeded `Linear(*case["sizes"])` as nn.Parameters, its
    sequence shard of the input, `y = fn(x_shard, W_r, b_r)` and the backward of sum(y * w_r),
    both inside `no_delegation(..., *forbidden)`. Returns y, the gradients, the bytes kept for
    backward (`saved`), those of the naive composition on the same shard (`naive`), and the
    collectives of the forward and the backward pass by kind."""
    from ..grading import GradingError, no_delegation
    from .counting import CommCounter
    from .tp_lab import by_kind

    _, x, w_r, weight, bias = _sp_column_case(case, rank, world)
    b, s, k = case["batch"], case["seq"], weight.shape[0]
    xin = seq_shard(x, rank, world).requires_grad_(True)
    with no_delegation("SPColumnLinear", *forbidden):
        with CommCounter() as fwd, SavedBytes(weight, bias) as saved:
            y = fn(xin, weight, bias)
        expect_shape(y, (b, s, k), f"SPColumnLinear's output on rank {rank} of {world}",
                     "the ranks' sequence shards gathered (all s tokens) times this rank's k = n_out / t rows of W.")
        if not y.requires_grad:
            raise GradingError(f"SPColumnLinear's output on rank {rank} of {world} does not require grad: return "
                               "the tensor your Function's forward computes (call it through .apply).")
        saved.add_graph(y)
        with CommCounter() as bwd:
            (y * w_r).sum().backward()
    return dict(y=y.detach(), xg=xin.grad, wg=weight.grad, bg=None if bias is None else bias.grad,
                saved=saved.total, naive=_naive_saved_bytes(xin, weight, bias), fwd=by_kind(fwd), bwd=by_kind(bwd))


def _forbidden() -> tuple:
    """What an SPColumnLinear answer may not call: the course's TP/SP code and torch's
    differentiable collectives."""
    import torch.distributed.nn.functional as dist_nn_f

    from .. import parallel
    from . import tensor_parallel, tp_lab

    return (tensor_parallel, tp_lab, parallel, dist_nn_f)


def _sp_column_rank(rank: int, world: int, fn, case: dict) -> dict:
    return run_sp_column(fn, rank, world, case, _forbidden())


def _sp_layer_rank(rank: int, world: int, fn, case: dict) -> dict:
    return run_sp_layer(fn, rank, world, case)


def _own(cls) -> None:
    from ..grading import expect_own
    from . import tensor_parallel, tp_lab

    expect_own(cls, "SPColumnLinear", tensor_parallel._SPColumnLinear, tp_lab.SPColumnLinear)


def launch_sp_column(cls, world: int, case: dict) -> list[dict]:
    """`cls` (the student's Function) is not the course's; then `run_sp_column(cls.apply, ...)`
    on `world` ranks with the course's TP/SP code forbidden (`launch_graded`: a GradingError on
    a rank is one in the notebook). The ranks' result dicts, in rank order."""
    from .graded import launch_graded

    _own(cls)
    return launch_graded(_sp_column_rank, world, args=(cls.apply, case))


def launch_sp_layer(cls, world: int, case: dict) -> list[dict]:
    """`run_sp_layer(cls.apply, ...)` on `world` ranks: the course's SP layer with `cls` as both
    column-parallel entries (`case` as for `tp_lab.block_case`)."""
    from .graded import launch_graded

    _own(cls)
    return launch_graded(_sp_layer_rank, world, args=(cls.apply, case))


def _tag(world: int, case: dict) -> str:
    n_in, n_out = case["sizes"]
    return (f"SPColumnLinear, Linear({n_in}, {n_out}{'' if case.get('bias', True) else ', bias=False'}), "
            f"(b, s) = ({case['batch']}, {case['seq']}) on {world} ranks")


def expect_sp_column_grads(res, world: int, case: dict) -> None:
    """The ranks' outputs and gradients against one process running the whole Linear (float64)."""
    from ..grading import expect_close, expect_equal
    from .tp_lab import cat_shards, one_process

    layer, x, w, _, _ = _sp_column_case(case, 0, 1)
    y_ref, xg_ref, g_ref = one_process(layer, x, w)
    tag = _tag(world, case)
    expect_close(cat_shards([r["y"] for r in res], -1, "outputs"), y_ref,
                 f"{tag}: the ranks' outputs side by side (last dim) vs the full layer", **_TOL,
                 hint="all-gather the sequence shards (dim 1, rank order), then x W_r^T + b_r.")
    expect_close(cat_shards([r["xg"] for r in res], 1, "input gradients"), xg_ref,
                 f"{tag}: the ranks' input gradients concatenated along the sequence vs one process", **_TOL,
                 hint="dX = dY W_r is a partial sum on each rank: reduce-scatter it along the sequence.")
    expect_close(cat_shards([r["wg"] for r in res], 0, "weight gradients"), g_ref["weight"],
                 f"{tag}: the ranks' weight gradients stacked (dim 0) vs one process", **_TOL,
                 hint="dW_r = dY^T X needs every rank's tokens of X: gather the saved shard again in backward.")
    if case.get("bias", True):
        expect_close(cat_shards([r["bg"] for r in res], 0, "bias gradients"), g_ref["bias"],
                     f"{tag}: the ranks' bias gradients stacked vs one process", **_TOL,
                     hint="db_r = dY summed over the batch and all s tokens.")
    else:
        expect_equal([r["bg"] is None for r in res], [True] * world, f"{tag}: no bias, no bias gradient",
                     hint="with bias=None return None as its gradient.")


def expect_sp_column_saved(res, world: int, case: dict) -> None:
    """Each rank keeps for backward at most 1/t of what the naive composition keeps (and something)."""
    from ..grading import expect_between

    tag = _tag(world, case)
    for r, rr in enumerate(res):
        expect_between(rr["saved"], 1, rr["naive"] / world,
                       f"{tag}, rank {r}: bytes kept for backward (the parameters left out), at most 1/{world} "
                       f"of the {rr['naive']} bytes F.linear(GatherFromSP(x)) keeps", unit="bytes",
                       hint="keep the input shard (ctx.save_for_backward), not the gathered input, and no copies; "
                            "0 bytes means the shard was kept where autograd cannot see it (a global).")


def expect_sp_column_comm(res, world: int, case: dict) -> None:
    """Forward: one all-gather of (b, s, n_in); backward: one all-gather and one reduce-scatter of it."""
    from ..grading import expect_equal

    S = 8 * case["batch"] * case["seq"] * case["sizes"][0]
    tag = _tag(world, case)
    for r, rr in enumerate(res):
        expect_equal((rr["fwd"], rr["bwd"]), ({"all_gather": (1, S)}, {"all_gather": (1, S), "reduce_scatter": (1, S)}),
                     f"{tag}, rank {r}: collectives (forward, backward) as {{kind: (calls, bytes of the full buffer)}}",
                     hint="forward: one all-gather of the input; backward: the same all-gather again (for dW) and "
                          "one reduce-scatter of dX; no all-reduce.")


class _Entry(nn.Module):
    """A column-parallel layer whose forward is `fn(x_shard, self.weight, self.bias)`."""

    def __init__(self, weight: nn.Parameter, bias, fn):
        super().__init__()
        self.weight, self.bias, self.fn = weight, bias, fn

    def forward(self, x):
        return self.fn(x, self.weight, self.bias)


def run_sp_layer(fn, rank: int, world: int, case: dict) -> dict:
    """In a rank: the course's sequence-parallel block (`tp_lab`, ScatterToSP exits) with both
    column-parallel entries (qkv, fc1) computed by `fn(x_shard, W_r, b_r)`; one forward and
    backward on the rank's sequence shard. Returns the output shard and the collectives of the
    whole step by kind (the replicated parameters' gradient sync is not part of it)."""
    from .counting import CommCounter
    from .tp_lab import GatherFromSP, ScatterToSP, TensorParallelBlock, block_case, by_kind, causal_mask

    block, x, w = block_case(**case)
    s = x.shape[1]
    lo, hi = rank * s // world, (rank + 1) * s // world
    tp = TensorParallelBlock(block, enter=GatherFromSP.apply, exit=ScatterToSP.apply)
    tp.qkv = _Entry(tp.qkv.weight, tp.qkv.bias, fn)
    tp.fc1 = _Entry(tp.fc1.weight, tp.fc1.bias, fn)
    xin = x[:, lo:hi].clone().requires_grad_(True)
    with CommCounter() as comm:
        out = tp(xin, causal_mask(s))
        (out * w[:, lo:hi]).sum().backward()
    return dict(out=out.detach(), comm=by_kind(comm))


def expect_sp_layer_comm(res, world: int, case: dict) -> None:
    """The layer's output against one process, and 6 all-gathers + 4 reduce-scatters of b s h per step."""
    from ..grading import expect_close, expect_equal
    from .tp_lab import block_case, cat_shards, causal_mask, one_process

    block, x, w = block_case(**case)
    out_ref, _, _ = one_process(block, x, w, causal_mask(x.shape[1]))
    S = 8 * x.numel()
    tag = f"a sequence-parallel layer {tuple(x.shape)} on {world} ranks with SPColumnLinear as qkv and fc1"
    expect_close(cat_shards([r["out"] for r in res], 1, "outputs"), out_ref,
                 f"{tag}: output shards concatenated along the sequence vs one process", **_TOL)
    for r, rr in enumerate(res):
        expect_equal(rr["comm"], {"all_gather": (6, 6 * S), "reduce_scatter": (4, 4 * S)},
                     f"{tag}, rank {r}: collectives of one forward and backward as {{kind: (calls, bytes)}}",
                     hint="2 entries x (1 all-gather forward, 1 all-gather + 1 reduce-scatter backward) + 2 exits x "
                          "(1 reduce-scatter forward, 1 all-gather backward) = 6 all-gathers + 4 reduce-scatters.")
