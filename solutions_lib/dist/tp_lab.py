"""Lab kit for assignment 11's tensor- and sequence-parallel exercises (not an answer).

The notebook's answers build on each other: the column- and row-parallel layers use the
student's f and g, the transformer block uses the student's layers, the sequence-parallel block
uses the student's sequence-parallel operators. A test cell grades one answer only, so it runs
that answer on top of the *stand-ins* below for everything upstream (`upstream(globals(), ...)`
binds them in the notebook's namespace for the duration of the check; the forked ranks inherit
them). The stand-ins have the notebook's interfaces and are built on the course's reference
`solutions_lib.dist.tensor_parallel` (Megatron-LM, Shoeybi et al. 2019; Korthikanti et al. 2022).

Also here: seeded cases, the one-process oracle (plain torch: the full `solutions_lib.models.Block`
run whole), the re-assembly of rank shards into full weights, and a saved-bytes probe.

Interfaces (the notebook's):
    CopyToTP.apply(x), ReduceFromTP.apply(x), GatherFromSP.apply(x), ScatterToSP.apply(x)
        on the default process group; the sequence is dim 1 of (batch, seq, hidden).
    ColumnParallelLinear(linear, enter=None)   rank r keeps rows [r k, (r+1) k) of W and b;
        forward(x) = enter(x) W_r^T + b_r, enter = f by default.
    RowParallelLinear(linear, exit=None)       rank r keeps columns [r k, (r+1) k) of W, the full
        bias; forward(x_r) = exit(x_r W_r^T) + b, exit = g by default.
    TensorParallelBlock(block, enter=None, exit=None)  attributes ln1, qkv, proj, ln2, fc1, fc2;
        qkv is column parallel over `head_major_qkv(block.qkv, t)` (rank r: [Q_r; K_r; V_r]).
    sync_replicated_grads(tp_block)  one all_reduce of the replicated parameters' gradients.
    SPColumnLinear.apply(x_shard, weight, bias)  gather(x_shard) W^T + b along dim 1, saving only
        the shard and gathering it again in backward (the memory-optimal SP entry).
"""
from __future__ import annotations

import copy
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from ..models import Block
from . import tensor_parallel as _tp

__all__ = ["STANDINS", "upstream", "block_case", "linear_case", "one_process", "head_major_qkv",
           "qkv_from_shards", "causal_mask", "saved_bytes", "by_kind", "cat_shards", "layernorm_saved_bytes", "REPLICATED"]

causal_mask = _tp.causal_mask

#: the parameters a TensorParallelBlock keeps whole on every rank (attribute paths)
REPLICATED = ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "proj.bias", "fc2.bias")


# ---------------------------------------------------------------- stand-ins with the notebook's interfaces


class CopyToTP:
    """f: identity forward, all-reduce backward (stand-in)."""
    apply = staticmethod(lambda x: _tp.copy_to_tp(x))


class ReduceFromTP:
    """g: all-reduce forward, identity backward (stand-in)."""
    apply = staticmethod(lambda x: _tp.reduce_from_tp(x))


class GatherFromSP:
    """f_sp: all-gather along dim 1 forward, reduce-scatter backward (stand-in)."""
    apply = staticmethod(lambda x: _tp.gather_from_sp(x, None, 1))


class ScatterToSP:
    """g_sp: reduce-scatter along dim 1 forward, all-gather backward (stand-in)."""
    apply = staticmethod(lambda x: _tp.scatter_to_sp(x, None, 1))


class SPColumnLinear:
    """The memory-optimal SP entry (stand-in): apply(x_shard, weight, bias) = gather(x_shard) W^T + b,
    only the shard saved, gathered again in backward (`tensor_parallel.sp_column_linear`)."""
    apply = staticmethod(lambda x, weight, bias=None: _tp.sp_column_linear(x, weight, bias, None, 1))


class ColumnParallelLinear(nn.Module):
    """Stand-in: rows [r k, (r+1) k) of W and b; forward enter(x) W_r^T + b_r."""

    def __init__(self, linear: nn.Linear, enter=None):
        super().__init__()
        rank, t = dist.get_rank(), dist.get_world_size()
        self.enter = enter if enter is not None else CopyToTP.apply
        self.weight = nn.Parameter(_tp.shard_rows(linear.weight.detach(), rank, t))
        self.bias = nn.Parameter(_tp.shard_rows(linear.bias.detach(), rank, t)) if linear.bias is not None else None

    def forward(self, x):
        return F.linear(self.enter(x), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """Stand-in: columns [r k, (r+1) k) of W, full bias; forward exit(x_r W_r^T) + b."""

    def __init__(self, linear: nn.Linear, exit=None):
        super().__init__()
        rank, t = dist.get_rank(), dist.get_world_size()
        n = linear.in_features
        if n % t:
            raise ValueError(f"the world size {t} must divide in_features={n}")
        k = n // t
        self.exit = exit if exit is not None else ReduceFromTP.apply
        self.weight = nn.Parameter(linear.weight.detach()[:, rank * k:(rank + 1) * k].clone())
        self.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None

    def forward(self, x):
        y = self.exit(F.linear(x, self.weight))
        return y + self.bias if self.bias is not None else y


def head_major_qkv(qkv: nn.Linear, t: int) -> nn.Linear:
    """A copy of the fused (3h, h) Q,K,V layer with its rows reordered [Q_0; K_0; V_0; Q_1; ...]
    so that t contiguous row blocks are each rank's heads of Q, K and V."""
    w, b = qkv.weight.detach(), qkv.bias.detach()
    h3 = w.shape[0]
    k = h3 // 3 // t
    rows = torch.cat([torch.arange(c * (h3 // 3) + r * k, c * (h3 // 3) + (r + 1) * k, device=w.device)
                      for r in range(t) for c in range(3)])
    out = nn.Linear(qkv.in_features, h3, device=w.device).to(w.dtype)  # on the layer's device
    with torch.no_grad():
        out.weight.copy_(w[rows])
        out.bias.copy_(b[rows])
    return out


class TensorParallelBlock(nn.Module):
    """Stand-in for the notebook's block (see the module docstring)."""

    def __init__(self, block: Block, enter=None, exit=None):
        super().__init__()
        t = dist.get_world_size()
        a, h = block.heads, block.proj.out_features
        if a % t:
            raise ValueError(f"the world size {t} must divide the number of heads {a}")
        self.heads, self.head_dim = a // t, h // a
        self.ln1, self.ln2 = copy.deepcopy(block.ln1), copy.deepcopy(block.ln2)
        self.qkv = ColumnParallelLinear(head_major_qkv(block.qkv, t), enter)
        self.proj = RowParallelLinear(block.proj, exit)
        self.fc1 = ColumnParallelLinear(block.fc1, enter)
        self.fc2 = RowParallelLinear(block.fc2, exit)

    def attention(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        B, S, _ = q.shape
        a, d = self.heads, self.head_dim
        q, k, v = (z.reshape(B, S, a, d).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(((q @ k.transpose(-2, -1)) / math.sqrt(d)).masked_fill(mask, float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, S, a * d))

    def forward(self, x, mask):
        x = x + self.attention(self.ln1(x), mask)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def sync_replicated_grads(tp_block) -> None:
    """Stand-in: sum the replicated parameters' gradients over the ranks (one all_reduce)."""
    ps = [tp_block.get_parameter(n) for n in REPLICATED]
    flat = torch.cat([p.grad.reshape(-1) for p in ps])
    dist.all_reduce(flat)
    i = 0
    for p in ps:
        p.grad.copy_(flat[i:i + p.numel()].view_as(p))
        i += p.numel()


STANDINS = {f.__name__: f for f in (CopyToTP, ReduceFromTP, GatherFromSP, ScatterToSP, SPColumnLinear, ColumnParallelLinear,
                                     RowParallelLinear, TensorParallelBlock, sync_replicated_grads)}


def upstream(namespace: dict, *names: str):
    """Bind the stand-ins `names` in `namespace` (a notebook's globals()) inside the block, then
    restore what was there (or remove what was not): `solutions_lib.upstream.swapped`."""
    from ..upstream import swapped

    return swapped(namespace, **{n: STANDINS[n] for n in names})


# ---------------------------------------------------------------- cases and the one-process oracle


def linear_case(seed: int, sizes, batch: int = 3, dtype=torch.float64):
    """Seeded nn.Linear layers of `sizes` ([6, 8, 4] -> Linear(6, 8), Linear(8, 4)), an input
    (batch, sizes[0]) and a weight of the loss for each layer's output (loss = sum(out * w))."""
    torch.manual_seed(seed)
    layers = [nn.Linear(i, o).to(dtype) for i, o in zip(sizes[:-1], sizes[1:])]
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, sizes[0], generator=g, dtype=dtype)
    ws = [torch.randn(batch, o, generator=g, dtype=dtype) for o in sizes[1:]]
    return layers, x, ws


def block_case(seed: int, hidden: int = 16, heads: int = 4, batch: int = 2, seq_len: int = 8,
               mlp_ratio: int = 4, dtype=torch.float64):
    """A seeded `Block` (LayerNorm weights and biases randomised too, so their gradients are not
    trivially symmetric), an input (batch, seq_len, hidden) and the loss weight w."""
    torch.manual_seed(seed)
    block = Block(hidden, heads, mlp_ratio).to(dtype)
    with torch.no_grad():
        for ln in (block.ln1, block.ln2):
            ln.weight.add_(0.1 * torch.randn_like(ln.weight))
            ln.bias.add_(0.1 * torch.randn_like(ln.bias))
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, seq_len, hidden, generator=g, dtype=dtype)
    w = torch.randn(batch, seq_len, hidden, generator=g, dtype=dtype)
    return block, x, w


def one_process(module: nn.Module, x: torch.Tensor, w: torch.Tensor, *extra):
    """Run `module(x, *extra)` whole in this process with loss = sum(out * w): the output, the
    input gradient and {parameter name: gradient} (plain torch; `module` is not modified)."""
    m = copy.deepcopy(module)
    m.zero_grad(set_to_none=True)
    xr = x.detach().clone().requires_grad_(True)
    out = m(xr, *extra)
    (out * w).sum().backward()
    return out.detach(), xr.grad, {n: p.grad.detach().clone() for n, p in m.named_parameters()}


def qkv_from_shards(shards):
    """Rank shards [Q_r; K_r; V_r] (each 3k rows) -> the full [Q; K; V] (rows or a bias)."""
    parts = [s.chunk(3, dim=0) for s in shards]
    return torch.cat([torch.cat([p[c] for p in parts]) for c in range(3)])


def saved_bytes(fn, *inputs, skip=()):
    """(output, bytes): the bytes of the distinct storages autograd saves while `fn(*inputs)` runs,
    leaving out the storages of `skip` (parameters, masks)."""
    skipped = {t.untyped_storage().data_ptr() for t in skip}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in skipped:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*inputs)
    return out, sum(seen.values())


_KINDS = {"all_reduce": ("all_reduce",),
          "all_gather": ("all_gather", "all_gather_into_tensor", "all_gather_single"),
          "reduce_scatter": ("reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single")}


def by_kind(counter) -> dict[str, tuple[int, int]]:
    """A CommCounter's {kind: (calls, bytes)} with the flavours of one collective merged
    (all_gather / all_gather_into_tensor / all_gather_single are one kind, and so on); any other
    operation keeps its own name. Kinds with no call are left out."""
    out = {}
    for op in counter.calls:
        kind = next((k for k, ops in _KINDS.items() if op in ops), op)
        c, b = out.get(kind, (0, 0))
        out[kind] = (c + int(counter.calls[op]), b + int(counter.bytes[op]))
    return {k: v for k, v in sorted(out.items()) if v[0]}


def cat_shards(parts, dim: int, what: str, qkv: bool = False) -> torch.Tensor:
    """The ranks' shards of one tensor put back together (`torch.cat` along `dim`, or the
    [Q_r; K_r; V_r] layout of `qkv_from_shards`); a missing shard (None, e.g. a gradient that
    never arrived) or mismatched shapes fail with a GradingError that names `what`."""
    from ..grading import GradingError

    if any(p is None for p in parts):
        ranks = [r for r, p in enumerate(parts) if p is None]
        raise GradingError(f"{what}: ranks {ranks} returned None (a parameter without a gradient? "
                           "check that the layer's tensors are nn.Parameters used in the forward).")
    try:
        return qkv_from_shards(parts) if qkv else torch.cat([p.detach() for p in parts], dim=dim)
    except RuntimeError as e:
        raise GradingError(f"{what}: the ranks' shards do not fit together (shapes "
                           f"{[tuple(p.shape) for p in parts]}): {e}") from None


class _Probe(nn.Module):
    """Runs `inner` with saved-tensor hooks that add the bytes of the distinct storages autograd
    saves (the inner module's parameters left out) to `sink`."""

    def __init__(self, inner: nn.Module, sink: dict):
        super().__init__()
        self.inner, self.sink = inner, sink

    def forward(self, x):
        skip = {p.untyped_storage().data_ptr() for p in self.inner.parameters()}

        def pack(t):
            st = t.untyped_storage()
            if st.data_ptr() not in skip:
                self.sink[st.data_ptr()] = st.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            return self.inner(x)


def layernorm_saved_bytes(tp_block, x, mask) -> int:
    """Run `tp_block(x, mask)` once and return the bytes its two LayerNorms (`ln1`, `ln2`, the
    region sequence parallelism shards) save for the backward pass on this rank: their inputs and
    per-token statistics. The block's LayerNorms are restored afterwards."""
    sink: dict = {}
    ln1, ln2 = tp_block.ln1, tp_block.ln2
    try:
        tp_block.ln1, tp_block.ln2 = _Probe(ln1, sink), _Probe(ln2, sink)
        tp_block(x, mask)
    finally:
        tp_block.ln1, tp_block.ln2 = ln1, ln2
    return int(sum(sink.values()))
