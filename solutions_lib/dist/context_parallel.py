"""Context parallelism: ring attention (Liu et al. 2023, "Ring Attention with Blockwise
Transformers for Near-Infinite Context") on a torch.distributed group.

    o = ring_attention(q, k, v, group, causal=False)     # q, k, v: (..., s/p, d), this rank's chunk

Rank r holds chunk r of the sequence (positions r s/p .. (r+1) s/p - 1) of Q, K and V. In p
steps every rank sees every K/V chunk: at step j it holds the chunk of rank (r - j) mod p,
computes the block's output o_j and row logsumexp l_j, and passes the chunk on to rank r+1
while receiving the next from rank r-1, the send and the receive posted as one
`dist.batch_isend_irecv` (on NCCL a lone send may wait for its receive, and every rank sends
first: batched, they progress together; gloo runs the two as isend and irecv). Partial results are merged with the
logsumexp, as in online softmax / FlashAttention (07):
    l = log(e^{l_a} + e^{l_b}),   o = e^{l_a - l} o_a + e^{l_b - l} o_b.
Causal: chunk src > r lies entirely in the future and is skipped (no compute; it still travels
on), chunk src = r gets the triangular mask, chunk src < r is fully visible.
Backward (a `torch.autograd.Function`): the FlashAttention recomputation backward per block with
D = rowsum(dO * O) and the saved logsumexp; the K/V chunks travel the ring again together with
their dK/dV accumulators, and one last hop returns each accumulator to its owner.
Bytes a rank receives per call (e = bytes per element, c = numel of one K (or V) chunk):
    forward  (p-1) * 2 c e       (p-1 K/V chunks)
    backward (p-1) * 4 c e + 2 c e   (K, V, dK, dV for p-1 hops; the final dK/dV hop)
and it sends the same. torch's CommCounter does not see isend/irecv: pass `comm=Counter()` to
count calls and bytes here.
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.distributed as dist

__all__ = ["ring_attention", "ring_attention_bytes", "split_sequence", "merge_partials"]


def split_sequence(x: torch.Tensor, rank: int, world: int, dim: int = -2) -> torch.Tensor:
    """Rank `rank`'s contiguous chunk of `x` along `dim` (the sequence); ValueError unless
    `world` divides the sequence length."""
    n = x.shape[dim]
    if not isinstance(world, int) or world < 1 or n % world:
        raise ValueError(f"the context-parallel size {world} must divide the sequence length {n}")
    k = n // world
    return x.narrow(dim, rank * k, k).clone()


def merge_partials(o_a, lse_a, o_b, lse_b):
    """Merge two partial attention results over disjoint key sets by their row logsumexps."""
    lse = torch.logaddexp(lse_a, lse_b)
    return torch.exp(lse_a - lse).unsqueeze(-1) * o_a + torch.exp(lse_b - lse).unsqueeze(-1) * o_b, lse


def _block(q, k, v, scale, diagonal):
    s = (q @ k.transpose(-2, -1)) * scale
    if diagonal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse.unsqueeze(-1)) @ v, lse, s


def _ring_pass(t: torch.Tensor, group, comm) -> torch.Tensor:
    """Send `t` to the next rank and receive the previous rank's tensor of the same shape."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    g = (lambda r: dist.get_global_rank(group, r)) if group is not None else (lambda r: r)
    t = t.contiguous()
    out = torch.empty_like(t)  # on t's device
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, g((rank + 1) % p), group=group),
                                    dist.P2POp(dist.irecv, out, g((rank - 1) % p), group=group)])
    for work in reversed(works):  # gloo: the receive, then the send; NCCL: the one batch
        work.wait()
    if comm is not None:
        nbytes = t.numel() * t.element_size()
        comm["send_calls"] += 1
        comm["recv_calls"] += 1
        comm["send_bytes"] += nbytes
        comm["recv_bytes"] += nbytes
    return out


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, group, causal, scale, comm):
        rank, p = dist.get_rank(group), dist.get_world_size(group)
        o = lse = None
        kv = torch.stack([k, v])
        for j in range(p):
            src = (rank - j) % p
            if not (causal and src > rank):
                o_j, lse_j, _ = _block(q, kv[0], kv[1], scale, causal and src == rank)
                o, lse = (o_j, lse_j) if o is None else merge_partials(o, lse, o_j, lse_j)
            if j < p - 1:
                kv = _ring_pass(kv, group, comm)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.group, ctx.causal, ctx.scale, ctx.comm = group, causal, scale, comm
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        group, causal, scale, comm = ctx.group, ctx.causal, ctx.scale, ctx.comm
        rank, p = dist.get_rank(group), dist.get_world_size(group)
        D = (do * o).sum(-1, keepdim=True)
        dq = torch.zeros_like(q)
        kv = torch.stack([k, v])
        dkv = torch.zeros_like(kv)
        for j in range(p):
            src = (rank - j) % p
            if not (causal and src > rank):
                kj, vj = kv[0], kv[1]
                s = (q @ kj.transpose(-2, -1)) * scale
                if causal and src == rank:
                    n = q.shape[-2]
                    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
                P = torch.exp(s - lse.unsqueeze(-1))
                dkv[1] += P.transpose(-2, -1) @ do
                dS = P * (do @ vj.transpose(-2, -1) - D)
                dq += (dS @ kj) * scale
                dkv[0] += (dS.transpose(-2, -1) @ q) * scale
            if j < p - 1:
                both = _ring_pass(torch.cat([kv, dkv]), group, comm)
                kv, dkv = both[:2], both[2:].clone()
        if p > 1:
            dkv = _ring_pass(dkv, group, comm)  # the accumulator of chunk r+1 goes home
        return dq, dkv[0], dkv[1], None, None, None, None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None, causal: bool = False,
                   scale: float | None = None, comm: Counter | None = None) -> torch.Tensor:
    """Attention of this rank's query chunk over the whole sequence, K/V chunks passed around the
    ring of `group` (default: the world), merged by logsumexp (Liu et al. 2023).

    q, k, v: (..., s/p, d), same shape and dtype, rank r holding positions r s/p .. (r+1) s/p - 1.
    Returns this rank's rows of softmax(Q K^T * scale (+ causal mask)) V, scale = 1/sqrt(d) by
    default; differentiable (a ring backward). `comm`: a Counter that receives send/recv calls
    and bytes (see `ring_attention_bytes`)."""
    if not (q.shape == k.shape == v.shape) or q.dim() < 2:
        raise ValueError(f"q, k, v must have one shape (..., s/p, d); got {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype) or not q.is_floating_point():
        raise ValueError(f"q, k, v must share one floating dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return _RingAttention.apply(q, k, v, group, bool(causal), scale, comm)


def ring_attention_bytes(chunk_numel: int, world: int, bytes_per_element: int = 4, backward: bool = True) -> dict:
    """Bytes one rank receives (and sends) in one ring_attention call: forward (p-1) K/V chunk
    pairs, 2 (p-1) c e; backward (p-1) K, V, dK, dV hops and the final dK/dV hop,
    4 (p-1) c e + 2 c e. c = numel of one chunk of K; units: bytes per rank (Liu et al. 2023)."""
    for name, x in (("chunk_numel", chunk_numel), ("world", world), ("bytes_per_element", bytes_per_element)):
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise ValueError(f"{name} must be a positive int, got {x!r}")
    p, c, e = world, chunk_numel, bytes_per_element
    fwd = 2 * (p - 1) * c * e
    bwd = (4 * (p - 1) + 2) * c * e if (backward and p > 1) else 0
    calls = (p - 1) + ((p - 1) + 1 if (backward and p > 1) else 0)
    return {"recv_bytes": fwd + bwd, "send_bytes": fwd + bwd, "recv_calls": calls, "send_calls": calls}
