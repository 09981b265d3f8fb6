"""Tensor parallelism by hand (Megatron-LM, Shoeybi et al. 2019) and sequence parallelism
(Korthikanti et al. 2022), on a torch.distributed group (gloo on CPU, NCCL on GPUs).

Operators (Megatron's names; "conjugate": each one's backward is the other's forward)
    f  identity forward,   all-reduce backward   (`copy_to_tp`: before a column-parallel layer)
    g  all-reduce forward, identity backward     (`reduce_from_tp`: after a row-parallel layer)
With sequence parallelism the activations between the TP regions are split along the sequence
and the pair becomes
    f_sp  all-gather (sequence) forward, reduce-scatter backward  (`gather_from_sp`)
    g_sp  reduce-scatter forward, all-gather backward             (`scatter_to_sp`)
an all-reduce being a reduce-scatter followed by an all-gather, the volume is the same.

Layers
    ColumnParallelLinear(linear, group)  Y_r = X A_r^T + b_r: rank r keeps out_features/t rows of
                                         the weight (y = x W^T in torch's layout); its output is
                                         split along the features.
    RowParallelLinear(linear, group)     Y = g(sum_r X_r B_r^T) + b: rank r keeps in_features/t
                                         columns and takes its slice of the input features.
    TensorParallelBlock(block, group)    a pre-LN transformer layer (`solutions_lib.models.Block`)
                                         with attention heads split across ranks (Q, K, V column
                                         parallel, output projection row parallel) and the MLP column
                                         then row parallel; LayerNorms replicated.
Megatron's count: one all-reduce per attention block and one per MLP block in the forward pass
(g) and one each in the backward pass (f), so a layer costs 2 forward + 2 backward all-reduces of
b s h elements. With `sequence_parallel=True` each becomes a reduce-scatter / all-gather pair,
and the column-parallel layers save only their sequence shard of the input and gather it again
in backward (Korthikanti et al. 2022, sec. 4.2.2), so every activation of the layer is 1/t.
Everything is built from full single-process modules, so tests can compare shard by shard.
"""
from __future__ import annotations

import math
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["copy_to_tp", "reduce_from_tp", "gather_from_sp", "scatter_to_sp", "sp_column_linear", "ColumnParallelLinear",
           "RowParallelLinear", "TensorParallelAttention", "TensorParallelMLP", "TensorParallelBlock",
           "tp_comm_calls_per_step", "tp_comm_bytes_per_step", "shard_rows", "causal_mask"]


def _quiet(collective, *args, **kwargs):
    """Run a collective without torch 2.13's FutureWarning that renames it to *_single (the old
    names are the ones every torch this course supports has, and what CommCounter counts)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return collective(*args, **kwargs)


def _world(group) -> tuple[int, int]:
    return dist.get_rank(group), dist.get_world_size(group)


def _divides(what: str, n: int, t: int) -> None:
    if n % t:
        raise ValueError(f"the tensor-parallel size {t} must divide {what}={n} (each rank takes an equal share)")


# ---------------------------------------------------------------- f and g (Megatron) and their SP twins

# f (identity forward, all-reduce backward) is the one the 04 MLP demo already uses
from ..parallel import _CopyToTP  # noqa: E402



class _ReduceFromTP(torch.autograd.Function):
    """g: forward all-reduces the partial sums over the TP group; identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        y = x.contiguous().clone()
        dist.all_reduce(y, group=group)
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _all_gather_seq(x: torch.Tensor, group, dim: int = 1) -> torch.Tensor:
    """Concatenate the ranks' sequence shards along `dim` (one all_gather_into_tensor)."""
    t = dist.get_world_size(group)
    xs = x.movedim(dim, 0).contiguous()
    out = torch.empty((t * xs.shape[0],) + tuple(xs.shape[1:]), dtype=x.dtype, device=x.device)
    _quiet(dist.all_gather_into_tensor, out, xs, group=group)
    return out.movedim(0, dim).contiguous()


def _reduce_scatter_seq(x: torch.Tensor, group, dim: int = 1) -> torch.Tensor:
    """Sum over the ranks and keep this rank's shard along `dim` (one reduce_scatter_tensor)."""
    t = dist.get_world_size(group)
    _divides(f"the sequence length (dim {dim} of shape {tuple(x.shape)})", x.shape[dim], t)
    xs = x.movedim(dim, 0).contiguous()
    out = torch.empty((xs.shape[0] // t,) + tuple(xs.shape[1:]), dtype=x.dtype, device=x.device)
    _quiet(dist.reduce_scatter_tensor, out, xs, op=dist.ReduceOp.SUM, group=group)
    return out.movedim(0, dim).contiguous()


class _GatherFromSP(torch.autograd.Function):
    """f_sp: all-gather along the sequence forward; reduce-scatter backward."""

    @staticmethod
    def forward(ctx, x, group, dim):
        ctx.group, ctx.dim = group, dim
        return _all_gather_seq(x, group, dim)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter_seq(grad, ctx.group, ctx.dim), None, None


class _ScatterToSP(torch.autograd.Function):
    """g_sp: reduce-scatter along the sequence forward; all-gather backward."""

    @staticmethod
    def forward(ctx, x, group, dim):
        ctx.group, ctx.dim = group, dim
        return _reduce_scatter_seq(x, group, dim)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_seq(grad, ctx.group, ctx.dim), None, None


class _SPColumnLinear(torch.autograd.Function):
    """All-gather the sequence shard, then x W^T + b; saves only the shard and gathers it again
    in backward (Korthikanti et al. 2022, sec. 4.2.2), whose input gradient is reduce-scattered."""

    @staticmethod
    def forward(ctx, x_shard, weight, bias, group, dim):
        ctx.group, ctx.dim, ctx.has_bias = group, dim, bias is not None
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.save_for_backward(x_shard, weight)
        return F.linear(_all_gather_seq(x_shard, group, dim), weight, bias)

    @staticmethod
    def backward(ctx, grad):
        # Under autocast the forward's F.linear ran in the autocast dtype (grad's dtype), while
        # the saved shard and weight keep theirs: compute in grad's dtype, return each gradient in
        # its input's dtype (all casts are no-ops without autocast).
        x_shard, weight = ctx.saved_tensors
        full = _all_gather_seq(x_shard, ctx.group, ctx.dim).to(grad.dtype)
        grad_in = _reduce_scatter_seq(grad @ weight.to(grad.dtype), ctx.group, ctx.dim).to(x_shard.dtype)
        g2 = grad.reshape(-1, grad.shape[-1])
        grad_w = (g2.t() @ full.reshape(-1, full.shape[-1])).to(weight.dtype)
        grad_b = g2.sum(0).to(ctx.bias_dtype) if ctx.has_bias else None
        return grad_in, grad_w, grad_b, None, None


def sp_column_linear(x_shard: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                     group=None, dim: int = 1) -> torch.Tensor:
    """The memory-optimal sequence-parallel entry into a column-parallel layer (Korthikanti et al.
    2022, sec. 4.2.2; Megatron-LM's `LinearWithGradAccumulationAndAsyncCommunication` with
    sequence parallelism): gather(x_shard) W_r^T + b_r, where gather concatenates the ranks'
    sequence shards along `dim`.

    Autograd keeps only `x_shard` (b, s/t, n_in), 1/t of what `F.linear(gather_from_sp(x), W_r,
    b_r)` keeps (the gathered input); the backward pass all-gathers it again for the weight
    gradient and reduce-scatters the input gradient. Collectives per call, on (b, s, n_in)
    buffers: forward 1 all-gather; backward 1 all-gather + 1 reduce-scatter. With the
    row-parallel exits (reduce-scatter forward, all-gather backward) a layer's two column-parallel
    entries make 6 all-gathers + 4 reduce-scatters per step.

    Raises ValueError (before any collective, so no rank is left waiting) when `x_shard` is not
    3-D, its last dim is not `weight`'s in_features, or `bias` is not (out_features,).
    """
    if not isinstance(x_shard, torch.Tensor) or x_shard.dim() != 3:
        raise ValueError(f"x_shard must be a 3-D tensor (batch, seq/t, n_in), got shape "
                         f"{tuple(getattr(x_shard, 'shape', ())) or type(x_shard).__name__}")
    if weight.dim() != 2 or x_shard.shape[-1] != weight.shape[1]:
        raise ValueError(f"x_shard's last dim {x_shard.shape[-1]} must equal the weight's in_features "
                         f"(weight shape {tuple(weight.shape)})")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must have shape ({weight.shape[0]},) (the weight's out_features), "
                         f"got {tuple(bias.shape)}")
    return _SPColumnLinear.apply(x_shard, weight, bias, group, dim)


def copy_to_tp(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's f: identity forward, all-reduce of the gradient backward."""
    return _CopyToTP.apply(x, group)


def reduce_from_tp(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's g: all-reduce forward, identity backward."""
    return _ReduceFromTP.apply(x, group)


def gather_from_sp(x: torch.Tensor, group=None, dim: int = 1) -> torch.Tensor:
    """Sequence-parallel f: all-gather of the sequence shards forward, reduce-scatter backward."""
    return _GatherFromSP.apply(x, group, dim)


def scatter_to_sp(x: torch.Tensor, group=None, dim: int = 1) -> torch.Tensor:
    """Sequence-parallel g: reduce-scatter to sequence shards forward, all-gather backward."""
    return _ScatterToSP.apply(x, group, dim)


# ---------------------------------------------------------------- layers


def shard_rows(w: torch.Tensor, rank: int, t: int, chunks: int = 1) -> torch.Tensor:
    """Rows of `w` (dim 0) that rank `rank` of `t` keeps when dim 0 is `chunks` stacked blocks
    (e.g. 3 for a fused Q,K,V weight), each split in t equal parts: a clone."""
    n = w.shape[0]
    _divides("the output features", n, chunks)
    per = n // chunks
    _divides("the output features per chunk", per, t)
    k = per // t
    return torch.cat([w[c * per + rank * k: c * per + (rank + 1) * k] for c in range(chunks)]).clone()


class ColumnParallelLinear(nn.Module):
    """Column-parallel linear layer built from a full `nn.Linear` (Megatron-LM, Shoeybi et al. 2019).

    Rank r keeps out_features/t rows of W (and of b), `chunks` blocks split separately (3 for a
    fused Q,K,V layer keeps each rank's heads of Q, K and V). forward(x): f(x) W_r^T + b_r, the
    output split along the features (no communication in forward; f's all-reduce in backward).
    `gather_output=True` all-gathers the features (for a stand-alone layer). With
    `sequence_parallel=True` the input is a sequence shard: all-gathered forward (f_sp), only the
    shard saved, gradient reduce-scattered backward.
    """

    def __init__(self, linear: nn.Linear, group=None, chunks: int = 1, gather_output: bool = False,
                 sequence_parallel: bool = False, seq_dim: int = 1):
        super().__init__()
        self.group, self.gather_output, self.sequence_parallel, self.seq_dim = (group, gather_output,
                                                                                sequence_parallel, seq_dim)
        self.rank, self.tp = _world(group)
        self.chunks = chunks
        self.weight = nn.Parameter(shard_rows(linear.weight.detach(), self.rank, self.tp, chunks))
        self.bias = (nn.Parameter(shard_rows(linear.bias.detach(), self.rank, self.tp, chunks))
                     if linear.bias is not None else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.sequence_parallel:
            y = _SPColumnLinear.apply(x, self.weight, self.bias, self.group, self.seq_dim)
        else:
            y = F.linear(copy_to_tp(x, self.group), self.weight, self.bias)
        if self.gather_output:
            if self.chunks != 1:
                raise ValueError("gather_output needs chunks=1 (the gathered features would be interleaved)")
            parts = [torch.empty_like(y) for _ in range(self.tp)]
            dist.all_gather(parts, y.contiguous(), group=self.group)  # forward only (no autograd)
            y = torch.cat(parts, dim=-1)
        return y


class RowParallelLinear(nn.Module):
    """Row-parallel linear layer built from a full `nn.Linear` (Megatron-LM, Shoeybi et al. 2019).

    Rank r keeps in_features/t columns of W; the bias is replicated and added once, after the
    reduction. forward(x_r) with x_r this rank's slice of the input features
    (`input_is_parallel=True`, the output of a ColumnParallelLinear) = g(x_r W_r^T) + b: one
    all-reduce forward, none backward. `sequence_parallel=True`: a reduce-scatter along the
    sequence instead (g_sp); the output is this rank's sequence shard.
    """

    def __init__(self, linear: nn.Linear, group=None, input_is_parallel: bool = True,
                 sequence_parallel: bool = False, seq_dim: int = 1):
        super().__init__()
        self.group, self.input_is_parallel, self.sequence_parallel, self.seq_dim = (
            group, input_is_parallel, sequence_parallel, seq_dim)
        self.rank, self.tp = _world(group)
        w = linear.weight.detach()
        _divides("in_features", w.shape[1], self.tp)
        k = w.shape[1] // self.tp
        self.weight = nn.Parameter(w[:, self.rank * k:(self.rank + 1) * k].clone())
        self.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            k = self.weight.shape[1]
            x = x[..., self.rank * k:(self.rank + 1) * k]
        partial = F.linear(x, self.weight)
        y = (scatter_to_sp(partial, self.group, self.seq_dim) if self.sequence_parallel
             else reduce_from_tp(partial, self.group))
        return y + self.bias if self.bias is not None else y


def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    """(s, s) bool, True above the diagonal (the future positions a query may not see), on
    `device` (default: the CPU; pass the activations' device, e.g. a rank's GPU under NCCL)."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


class TensorParallelAttention(nn.Module):
    """Self-attention with the heads split across the TP group: Q, K, V column parallel (each rank
    computes a/t heads end to end), output projection row parallel. One all-reduce forward (g),
    one backward (f); under sequence parallelism one all-gather + one reduce-scatter forward."""

    def __init__(self, qkv: nn.Linear, proj: nn.Linear, heads: int, group=None, sequence_parallel: bool = False):
        super().__init__()
        rank, t = _world(group)
        hidden = proj.out_features
        _divides("the number of heads", heads, t)
        if hidden % heads:
            raise ValueError(f"heads={heads} must divide hidden={hidden}")
        self.heads_local, self.head_dim = heads // t, hidden // heads
        self.qkv = ColumnParallelLinear(qkv, group, chunks=3, sequence_parallel=sequence_parallel)
        self.proj = RowParallelLinear(proj, group, sequence_parallel=sequence_parallel)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        qkv = self.qkv(x)
        B, S, _ = qkv.shape
        a, d = self.heads_local, self.head_dim
        q, k, v = qkv.split(a * d, dim=-1)
        # the same operations as solutions_lib.models.Block.attention, on a/t heads
        q, k, v = (z.reshape(B, S, a, d).transpose(1, 2).contiguous() for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        att = torch.softmax(scores, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, S, a * d)
        return self.proj(y)


class TensorParallelMLP(nn.Module):
    """fc1 column parallel, GELU on the local features, fc2 row parallel: one all-reduce forward
    (after fc2), one backward (before fc1); no communication between the two matmuls."""

    def __init__(self, fc1: nn.Linear, fc2: nn.Linear, group=None, sequence_parallel: bool = False):
        super().__init__()
        self.fc1 = ColumnParallelLinear(fc1, group, sequence_parallel=sequence_parallel)
        self.fc2 = RowParallelLinear(fc2, group, sequence_parallel=sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class TensorParallelBlock(nn.Module):
    """A pre-LN transformer layer split over a TP group, built from a full `solutions_lib.models.Block`
    (ln1, qkv, proj, ln2, fc1, fc2; x + Attn(LN1(x)), then + MLP(LN2(.))).

    forward(x, mask): x (b, s, h) replicated on every rank, output replicated; with
    `sequence_parallel=True` x and the output are this rank's sequence shard (b, s/t, h)
    (rank r holds positions r s/t .. (r+1) s/t - 1); `mask` is always the full (s, s) mask.
    Communication per layer and step (Megatron-LM; Korthikanti et al. 2022):
      TP:      all_reduce 2 forward + 2 backward, each b s h elements;
      TP + SP: forward  all_gather 2 + reduce_scatter 2; backward all_gather 4 (2 re-gathers of the
               saved shards + 2 from g_sp) + reduce_scatter 2; each on a b s h buffer.
    Under SP the replicated parameters (LayerNorms, row-parallel biases) see only their shard's
    gradient: call `allreduce_replicated_grads()` after backward (one all_reduce of 6h values
    per layer; Megatron does the same).
    """

    def __init__(self, block: nn.Module, group=None, sequence_parallel: bool = False):
        super().__init__()
        self.group, self.sequence_parallel = group, sequence_parallel
        self.ln1 = _copy_module(block.ln1)
        self.ln2 = _copy_module(block.ln2)
        self.attn = TensorParallelAttention(block.qkv, block.proj, block.heads, group, sequence_parallel)
        self.mlp = TensorParallelMLP(block.fc1, block.fc2, group, sequence_parallel)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask)
        return x + self.mlp(self.ln2(x))

    def replicated_parameters(self) -> list[nn.Parameter]:
        """Parameters every rank holds whole: LayerNorms and the row-parallel biases."""
        ps = [*self.ln1.parameters(), *self.ln2.parameters()]
        return ps + [p for p in (self.attn.proj.bias, self.mlp.fc2.bias) if p is not None]

    def allreduce_replicated_grads(self) -> int:
        """Sum the replicated parameters' gradients over the TP group (needed with sequence
        parallelism, a no-op without); one all_reduce of their flattened gradients. Returns the calls."""
        if not self.sequence_parallel:
            return 0
        ps = [p for p in self.replicated_parameters() if p.grad is not None]
        flat = torch.cat([p.grad.reshape(-1) for p in ps])
        dist.all_reduce(flat, group=self.group)
        i = 0
        for p in ps:
            p.grad.copy_(flat[i:i + p.numel()].view_as(p))
            i += p.numel()
        return 1


def _copy_module(m: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(m)


# ---------------------------------------------------------------- formulas


def _int(name, v, minimum=1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")
    return v


def tp_comm_calls_per_step(layers: int, tp: int, sequence_parallel: bool = False, backward: bool = True,
                           grad_sync: bool = True) -> dict[str, int]:
    """Collective calls one rank issues for `layers` TensorParallelBlocks in one step.

    TP (Megatron-LM, Shoeybi et al. 2019): all_reduce 2 L forward (g after the attention and the
    MLP) + 2 L backward (f before them). TP + SP (Korthikanti et al. 2022): all_gather_into_tensor
    2 L forward + 4 L backward, reduce_scatter_tensor 2 L forward + 2 L backward, plus one
    all_reduce of the replicated parameters' gradients per layer when `grad_sync`.
    tp = 1: no calls. Counts are per rank; units: calls.
    """
    L, t = _int("layers", layers), _int("tp", tp)
    if t == 1:
        return {}
    if not sequence_parallel:
        return {"all_reduce": (4 if backward else 2) * L}
    out = {"all_gather_into_tensor": (6 if backward else 2) * L,
           "reduce_scatter_tensor": (4 if backward else 2) * L}
    if backward and grad_sync:
        out["all_reduce"] = L
    return out


def tp_comm_bytes_per_step(batch: int, seq_len: int, hidden: int, layers: int, tp: int,
                           sequence_parallel: bool = False, bytes_per_element: int = 4, backward: bool = True,
                           grad_sync: bool = True) -> dict[str, int]:
    """Bytes per collective kind for `tp_comm_calls_per_step`, counted as `CommCounter` does (the
    full buffer S = b s h e of each call: an all-reduce's tensor, a reduce-scatter's input, an
    all-gather's output). The SP grad sync is 6 h e per layer (2 LayerNorms' weight and bias, 2
    row-parallel biases). Units: bytes per rank per step."""
    b, s, h = _int("batch", batch), _int("seq_len", seq_len), _int("hidden", hidden)
    e = _int("bytes_per_element", bytes_per_element)
    calls = tp_comm_calls_per_step(layers, tp, sequence_parallel, backward, grad_sync)
    S = b * s * h * e
    out = {op: n * S for op, n in calls.items()}
    if sequence_parallel and "all_reduce" in out:
        out["all_reduce"] = calls["all_reduce"] * 6 * h * e
    return out
