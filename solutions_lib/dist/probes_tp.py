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
"""
from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["seq_linear_case", "seq_shard", "sum_shards", "expect_shape"]


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
