"""A 2-D device mesh by hand: data parallelism x tensor parallelism with process groups.

    mesh = init_mesh(dp=2, tp=2)            # on 4 ranks; every rank calls it (new_group is collective)
    block = TensorParallelBlock(full_block, group=mesh.tp_group)
    loss.backward(); average_gradients(block.parameters(), mesh.dp_group)

Layout (Megatron-LM's convention, TP innermost so a TP group sits on one node's fast links):
    global rank = dp_rank * tp + tp_rank
    TP group of rank r: the tp consecutive ranks {d tp, ..., d tp + tp - 1}
    DP group of rank r: the ranks with the same tp_rank, {t, t + tp, ..., t + (dp-1) tp}
The TP collectives (f/g all-reduces, 4 per layer and step) stay inside the TP group; each
parameter shard is averaged across its DP group (one flat all-reduce of the shard's gradients
per step, P/tp elements). `count_by_group()` counts collectives per (operation, group ranks).
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["MeshGroups", "init_mesh", "mesh_coordinates", "average_gradients", "count_by_group"]


@dataclass
class MeshGroups:
    dp: int
    tp: int
    dp_rank: int
    tp_rank: int
    dp_group: object
    tp_group: object
    dp_ranks: tuple
    tp_ranks: tuple


def mesh_coordinates(rank: int, dp: int, tp: int) -> tuple[int, int]:
    """(dp_rank, tp_rank) of global `rank` on a dp x tp mesh (TP innermost)."""
    for name, v in (("dp", dp), ("tp", tp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not isinstance(rank, int) or not 0 <= rank < dp * tp:
        raise ValueError(f"rank must be in 0..{dp * tp - 1}, got {rank!r}")
    return divmod(rank, tp)


def init_mesh(dp: int, tp: int) -> MeshGroups:
    """Create the TP and DP process groups of a dp x tp mesh on the current world (all ranks must
    call it: `new_group` is collective and every rank creates every group, in one order).
    ValueError unless dp * tp equals the world size."""
    world = dist.get_world_size()
    if isinstance(dp, bool) or isinstance(tp, bool) or not isinstance(dp, int) or not isinstance(tp, int) \
            or dp < 1 or tp < 1 or dp * tp != world:
        raise ValueError(f"dp x tp = {dp} x {tp} must equal the world size {world}")
    rank = dist.get_rank()
    d, t = mesh_coordinates(rank, dp, tp)
    tp_group = dp_group = None
    tp_ranks = dp_ranks = ()
    for i in range(dp):
        ranks = tuple(range(i * tp, (i + 1) * tp))
        g = dist.new_group(list(ranks))
        if i == d:
            tp_group, tp_ranks = g, ranks
    for j in range(tp):
        ranks = tuple(range(j, world, tp))
        g = dist.new_group(list(ranks))
        if j == t:
            dp_group, dp_ranks = g, ranks
    return MeshGroups(dp, tp, d, t, dp_group, tp_group, dp_ranks, tp_ranks)


def average_gradients(params, group) -> int:
    """Average the gradients of `params` over `group` with one flat all-reduce (sum, then / size).
    Returns the number of collective calls (1, or 0 for a group of one)."""
    ps = [p for p in params if p.grad is not None]
    n = dist.get_world_size(group)
    if n == 1 or not ps:
        return 0
    flat = torch.cat([p.grad.reshape(-1) for p in ps])
    dist.all_reduce(flat, group=group)
    flat /= n
    i = 0
    for p in ps:
        p.grad.copy_(flat[i:i + p.numel()].view_as(p.grad))
        i += p.numel()
    return 1


_OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast", "all_gather")


@contextmanager
def count_by_group():
    """Count collectives by (operation, ranks of the group) inside the block:
    `with count_by_group() as calls: ...; calls[("all_reduce", (0, 1))]`."""
    import torch.distributed.distributed_c10d as c10d

    calls: Counter = Counter()
    saved = []

    def wrap(name, fn):
        def counted(*args, group=None, **kwargs):
            ranks = tuple(dist.get_process_group_ranks(group)) if group is not None \
                else tuple(range(dist.get_world_size()))
            calls[(name, ranks)] += 1
            return fn(*args, group=group, **kwargs)
        return counted

    for name in _OPS:
        original = getattr(c10d, name, None)
        if original is None:
            continue
        w = wrap(name, original)
        for mod in (dist, c10d):
            if getattr(mod, name, None) is original:
                saved.append((mod, name, original))
                setattr(mod, name, w)
    try:
        yield calls
    finally:
        for mod, name, original in reversed(saved):
            setattr(mod, name, original)
