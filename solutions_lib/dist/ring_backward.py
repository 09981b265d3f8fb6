"""The backward pass of ring attention, as a plain function (the reference answer of 11 exercises 2,
B.4; withheld at grading time).

    dq, dk, dv = ring_attention_backward(q, k, v, o, lse, do, causal=False)

Called on every rank of the world group with that rank's chunks (..., n, d) of Q, K, V, its rows
`o` of the forward output, their log-sum-exp `lse` (..., n) over the whole (masked) sequence and the
gradient `do` of the loss with respect to `o`. Returns the gradient with respect to the rank's own
Q, K and V chunks. The K/V chunks travel the ring again, each with the dK/dV accumulator of its
owner; after p - 1 hops rank r holds the accumulator of chunk r + 1, and one last hop sends it
home. Per block (queries of this rank, keys of chunk src), FlashAttention's recomputation with the
saved log-sum-exp, never the full sequence's scores:

    P  = exp(S - lse)                 S = Q K_src^T / sqrt(d) (+ the causal mask when src = r)
    dV_src += P^T dO                  D = rowsum(dO * O)
    dS = P * (dO V_src^T - D)
    dQ += dS K_src / sqrt(d),   dK_src += dS^T Q / sqrt(d)

Bytes each rank sends (and receives): (p - 1) hops of K, V, dK, dV and the final dK/dV hop,
(4 (p - 1) + 2) c e, with c the elements of one chunk of K and e the bytes per element. The
course's `context_parallel._RingAttention.backward` is the same algorithm inside an autograd
Function (with a group and the zig-zag layout).
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

__all__ = ["ring_attention_backward"]


def _ring_pass(t: torch.Tensor) -> torch.Tensor:
    """Send `t` to rank r + 1, receive rank r - 1's tensor of the same shape (mod p)."""
    rank, p = dist.get_rank(), dist.get_world_size()
    t = t.contiguous()
    out = torch.empty_like(t)
    send = dist.isend(t, (rank + 1) % p)
    dist.recv(out, (rank - 1) % p)
    send.wait()
    return out


def ring_attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                            lse: torch.Tensor, do: torch.Tensor, causal: bool = False):
    """(dq, dk, dv) of this rank's chunks for the loss whose gradient with respect to this rank's
    rows of the ring-attention output is `do` (see the module docstring)."""
    rank, p = dist.get_rank(), dist.get_world_size()
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    D = (do * o).sum(-1, keepdim=True)
    dq = torch.zeros_like(q)
    kv = torch.stack([k, v])
    dkv = torch.zeros_like(kv)
    for j in range(p):
        src = (rank - j) % p
        if not (causal and src > rank):
            s = (q @ kv[0].transpose(-2, -1)) * scale
            if causal and src == rank:
                s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
            P = torch.exp(s - lse.unsqueeze(-1))
            dkv[1] += P.transpose(-2, -1) @ do
            dS = P * (do @ kv[1].transpose(-2, -1) - D)
            dq += (dS @ kv[0]) * scale
            dkv[0] += (dS.transpose(-2, -1) @ q) * scale
        if j < p - 1:
            both = _ring_pass(torch.cat([kv, dkv]))
            kv, dkv = both[:2], both[2:].clone()
    if p > 1:
        dkv = _ring_pass(dkv)   # the accumulator of chunk r + 1 goes home
    return dq, dkv[0], dkv[1]
