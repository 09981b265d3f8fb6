"""Expert parallelism on gloo ranks: the references of assignment 12, exercises 1 (EXT-EP).

E experts live on n expert-parallel ranks in contiguous blocks: rank r of the EP group holds
experts [r E/n, (r+1) E/n). Every rank routes its own tokens (a top-k router replicated on
every rank) and then, per MoE layer and step (GShard, Lepikhin et al. 2020; DeepSpeed-MoE):

1. **split sizes**: each rank counts the assignments it sends to each expert (E int64) and
   exchanges the counts with one `all_to_all_single`, so every rank knows how many rows it
   will receive from each peer, for each of its local experts (groups are variable-sized);
2. **dispatch**: one all-to-all of the token rows grouped by destination (T_r k rows of h), with
   the split sizes of step 1 (`all_to_all_single`: gloo's list `all_to_all` needs equal sizes);
3. the local experts run on the rows they received;
4. **combine**: one all-to-all back (the same split sizes, reversed), then each token's
   output is the gate-weighted sum of its k expert outputs.

The backward pass is the same two all-to-alls in reverse (autograd through `_AllToAll`).
Bytes per MoE layer and step, summed over the EP ranks: per token, top_k * h * e bytes each
way, so dispatch + combine = 2 T k h e in the forward and as much again in the backward
(e = bytes per element; `comms.moe_alltoall_bytes`), plus E int64 split sizes per rank.
Load imbalance: a rank's expert work is the rows it receives; every rank waits at the combine
for the most loaded one, so the step time is set by max over ranks of the rows, not the mean.

`ep_moe` is equal, forward and backward, to `solutions_lib.moe.moe_layer` (capacity None) run
in one process on all ranks' tokens. `ep_dp_groups(ep)` builds the EP x DP mesh with
`new_group`: EP groups of `ep` consecutive ranks, DP groups of the ranks holding the same
experts; `sync_ep_dp_grads` sums the expert gradients over DP and the router's over all ranks.
`bench_moe()` prints bytes vs the formula, imbalance and step time vs its prediction.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .. import moe as _moe

__all__ = ["ep_moe", "ep_dp_groups", "sync_ep_dp_grads", "ep_bytes_per_step", "bench_moe"]


class _AllToAll(torch.autograd.Function):
    """Rows of `x` split by `in_splits` go to the ranks; `out_splits` rows come back from each.
    Backward: the gradient rows travel the reverse way."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group):
        ctx.splits, ctx.group = (list(out_splits), list(in_splits)), group
        return _exchange(x, out_splits, in_splits, group)

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits = ctx.splits
        return _exchange(grad, in_splits, out_splits, ctx.group), None, None, None


def _exchange(x, out_splits, in_splits, group):
    # gloo's list all_to_all needs equal sizes; all_to_all_single takes split sizes
    x = x.contiguous()
    out = x.new_empty((int(sum(out_splits)),) + tuple(x.shape[1:]))
    dist.all_to_all_single(out, x, [int(s) for s in out_splits], [int(s) for s in in_splits], group=group)
    return out


def ep_moe(x: torch.Tensor, router_weight: torch.Tensor, local_experts, top_k: int, n_experts: int,
           group=None) -> torch.Tensor:
    """This rank's MoE output (T_r, h) for its tokens x (T_r, h), with expert parallelism.

    router_weight (h, E) is the same on every rank; local_experts the E/n experts this rank
    holds (rank r of `group`: experts r E/n .. (r+1) E/n - 1, in order). No capacity limit:
    every assignment is served. ValueError: n does not divide E, len(local_experts) != E/n,
    bad shapes."""
    n, r = dist.get_world_size(group), dist.get_rank(group)
    if isinstance(n_experts, bool) or not isinstance(n_experts, int) or n_experts < 1 or n_experts % n:
        raise ValueError(f"the {n} expert-parallel ranks must divide n_experts = {n_experts!r}")
    per = n_experts // n
    if len(local_experts) != per:
        raise ValueError(f"rank {r} must hold {per} experts (E/n), got {len(local_experts)}")
    if x.dim() != 2 or router_weight.shape != (x.shape[1], n_experts):
        raise ValueError(f"x must be (tokens, h) and router_weight (h, {n_experts})")
    gates, idx = _moe.top_k_route(x @ router_weight, top_k)
    flat = idx.reshape(-1)
    order = torch.argsort(flat, stable=True)              # assignments grouped by expert (so by rank)
    send = torch.bincount(flat, minlength=n_experts)      # rows for each expert, from this rank
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)       # 1. split sizes: [from rank s: my experts]
    recv = recv.view(n, per)
    in_splits = send.view(n, per).sum(1).tolist()
    out_splits = recv.sum(1).tolist()
    rows = _AllToAll.apply(x[order // top_k], out_splits, in_splits, group)        # 2. dispatch
    local = torch.repeat_interleave(torch.arange(per).repeat(n), recv.reshape(-1))
    out = rows * 0        # not zeros_like: a rank that received no rows must still join the backward all-to-alls
    for e in range(per):                                                             # 3. experts
        sel = torch.nonzero(local == e, as_tuple=True)[0]
        if sel.numel():
            out = out.index_add(0, sel, local_experts[e](rows[sel]))
    back = _AllToAll.apply(out, in_splits, out_splits, group)                       # 4. combine
    w = gates.reshape(-1)[order].unsqueeze(1)
    return torch.zeros_like(x).index_add(0, order // top_k, w * back)


def ep_dp_groups(ep: int):
    """(ep_group, dp_group) of this rank on an EP x DP mesh of the world: EP groups of `ep`
    consecutive ranks [d ep, (d+1) ep), DP groups {r, r + ep, r + 2 ep, ...} (the ranks holding
    the same experts). Every rank creates every group (new_group is collective)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1 or world % ep:
        raise ValueError(f"ep = {ep!r} must be an int dividing the world size {world}")
    ep_groups = [dist.new_group(list(range(d * ep, (d + 1) * ep))) for d in range(world // ep)]
    dp_groups = [dist.new_group(list(range(s, world, ep))) for s in range(ep)]
    return ep_groups[rank // ep], dp_groups[rank % ep]


def sync_ep_dp_grads(router_weight, local_experts, dp_group) -> None:
    """Sum the gradients a step left: each expert's over its DP group (its replicas), the
    router's over every rank (it is replicated everywhere)."""
    for p in [router_weight] + [p for e in local_experts for p in e.parameters()]:
        if p.grad is None:          # an expert that got no token on this rank: every rank must join
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, group=None if p is router_weight else dp_group)


def ep_bytes_per_step(tokens: int, top_k: int, hidden: int, bytes_per_element: float, backward: bool = True) -> float:
    """All-to-all bytes of one MoE layer per step, summed over the EP ranks (split sizes aside):
    (4 if backward else 2) * tokens * top_k * hidden * bytes_per_element (tokens: all ranks')."""
    from ..comms import moe_alltoall_bytes
    return moe_alltoall_bytes(tokens, top_k, hidden, bytes_per_element, backward)


# ------------------------------------------------------------------------------------ bench


def _bench_rank(rank, world, tokens, hidden, ffn, n_experts, top_k, skew, repeats):
    from .counting import CommCounter
    g = torch.Generator().manual_seed(1234)
    w = torch.randn(hidden, n_experts, generator=g) * 0.02
    w[:, :n_experts // world] += skew * torch.randn(hidden, 1, generator=g).abs().sign()   # favour rank 0
    experts = _moe.expert_mlps(n_experts, hidden, ffn, seed=5, dtype=torch.float32)
    per = n_experts // world
    mine = experts[rank * per:(rank + 1) * per]
    gx = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(tokens, hidden, generator=gx)
    x = (x.abs() if skew else x).requires_grad_(True)
    w = w.requires_grad_(True)
    times, busy = [], []
    for i in range(repeats + 1):
        dist.barrier()
        t0, c0 = time.perf_counter(), time.thread_time()
        with CommCounter() as fwd:
            y = ep_moe(x, w, mine, top_k, n_experts)
        with CommCounter() as bwd:
            y.sum().backward()
        c1 = time.thread_time()
        dist.barrier()
        if i:                                  # the first step is a warm-up
            times.append(time.perf_counter() - t0)
            busy.append(c1 - c0)
    idx = _moe.top_k_route(x @ w.detach(), top_k)[1]
    return dict(fwd=fwd.summary(), bwd=bwd.summary(), step=sorted(times)[len(times) // 2],
                busy=sorted(busy)[len(busy) // 2], idx=idx)


def bench_moe(out=print) -> bool:
    """Expert parallelism on 2 and 4 gloo ranks: all-to-all bytes per step against the closed
    form (per token, top_k h e bytes each way, forward and backward), load imbalance (max/mean
    rows per rank) and the step's critical path against its prediction.

    The cost of imbalance: every rank waits at the combine for the most loaded one, so the step
    is set by max over ranks of the rows it computes. Measured: each rank's busy (CPU thread)
    time of a forward + backward step, whose max is the step's critical path (busy time, not wall
    time, so that ranks sharing a loaded machine's cores still measure their own work); predicted:
    seconds per row from a random-routing run (mean busy / mean rows) times the max rows of a
    skewed run. Returns whether the bytes match exactly and the prediction is within 2x."""
    from .launch import launch
    tokens, hidden, ffn, top_k, e = 256, 64, 2048, 2, 4
    ok = True
    out(f"{'ranks':>5} {'routing':>8} {'a2a bytes fwd':>14} {'formula':>10} {'bwd':>10} {'split B':>8} "
        f"{'max/mean rows':>13} {'busy ms':>8} {'pred ms':>8} {'wall ms':>8}")
    for world in (2, 4):
        n_experts = 2 * world
        per_row = None
        for skew in (0.0, 1.0):
            res = launch(_bench_rank, world, args=(tokens, hidden, ffn, n_experts, top_k, skew, 3),
                         threads_per_rank=1, timeout=300)
            idx = torch.cat([r["idx"] for r in res])
            rep = _moe.load_report(idx, n_experts, world, 1.0)
            split = world * n_experts * 8           # the E int64 split sizes of every rank
            fwd = sum(r["fwd"].get("all_to_all_single", (0, 0))[1] for r in res) - split
            bwd = sum(r["bwd"].get("all_to_all_single", (0, 0))[1] for r in res)
            formula = ep_bytes_per_step(world * tokens, top_k, hidden, e, backward=False)
            busy = max(r["busy"] for r in res)
            wall = max(r["step"] for r in res)
            if per_row is None:
                per_row = sum(r["busy"] for r in res) / sum(rep["tokens_per_rank"])
            pred = per_row * max(rep["tokens_per_rank"])
            ok &= fwd == formula and bwd == formula and 0.5 <= busy / pred <= 2.0
            out(f"{world:>5} {'skewed' if skew else 'random':>8} {fwd:>14,} {formula:>10,.0f} {bwd:>10,} {split:>8} "
                f"{rep['rank_imbalance']:>13.2f} {busy * 1e3:>8.1f} {pred * 1e3:>8.1f} {wall * 1e3:>8.1f}")
    out("bytes: dispatch + combine move top_k h e per token each way (as much again in the backward); busy: "
        "the most loaded rank's CPU time per step; pred: seconds per row (random run) x max rows per rank")
    return bool(ok)
