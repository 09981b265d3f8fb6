"""Test machinery for assignment 04, exercise B.2 (not an answer): the student's tensor-parallel
MLP (`shard_mlp`, `tp_mlp_forward`) run on launched gloo ranks and checked from outside.

    check_shards(shard_mlp, seed, h, world)     # rank r's blocks: columns of W1 and b1, rows of W2
    check_tp_run(shard_mlp, tp_mlp_forward, seed, h, batch, world, guard)
        # on `world` ranks: one all-reduce of exactly the (batch..., h) float32 output, counted by
        # CommCounter, and every rank's output equal to the unsharded GELU MLP's;
        # guard=True also fails a call into the reference or torch's tensor-parallel API

The inputs come from `seed` (the test cell keeps its own seeds); the expected output is the
unsharded MLP computed here with torch, the expected shards `torch.chunk` of the full weights.
"""
from __future__ import annotations

import pathlib
import re
import types

import torch
import torch.nn.functional as F

__all__ = ["check_shards", "check_tp_run", "tp_forbidden"]


def _file_as_module(name, path):
    """A stand-in module for no_delegation: flags calls into `path` without importing it."""
    stub = types.ModuleType(name)
    stub.__file__ = str(path)
    return stub


def tp_forbidden() -> list:
    """The reference (`solutions_lib.parallel`) and torch's tensor-parallel API (its `api` and
    `style` files, flagged without importing them)."""
    import solutions_lib.parallel as ref

    tp_dir = pathlib.Path(torch.distributed.__file__).parent / "tensor" / "parallel"
    return [ref] + [_file_as_module(f"torch.distributed.tensor.parallel.{n}", tp_dir / f"{n}.py") for n in ("api", "style")]


def _graded_tp_rank(rank, world_size, shard_mlp, tp_mlp_forward, x, W1, b1, W2, b2, guard):
    from solutions_lib.dist import CommCounter
    from solutions_lib.grading import no_delegation

    forbidden = tp_forbidden() if guard else []
    with no_delegation("the tensor-parallel MLP (shard_mlp, tp_mlp_forward)", *forbidden):
        W1_s, b1_s, W2_s = shard_mlp(W1, b1, W2, rank, world_size)
        with CommCounter() as comm:
            y = tp_mlp_forward(x, W1_s, b1_s, W2_s, b2)
    return {"y": torch.as_tensor(y).detach().numpy(), "comm": comm.summary()}


def check_tp_run(shard_mlp, tp_mlp_forward, seed, h, batch, world, guard) -> None:
    """The MLP y = GELU(x W1 + b1) W2 + b2 of width h on `world` launched ranks, x of shape
    (*batch, h): each rank's collectives (one all_reduce), its bytes (x.numel() float32) and its output."""
    from solutions_lib.dist import LaunchError, launch
    from solutions_lib.grading import GradingError, expect_close, expect_equal

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, h, generator=g)
    W1, b1 = torch.randn(h, 4 * h, generator=g) / h**0.5, torch.randn(4 * h, generator=g)
    W2, b2 = torch.randn(4 * h, h, generator=g) / (4 * h) ** 0.5, torch.randn(h, generator=g)
    expected = (F.gelu(x @ W1 + b1) @ W2 + b2).numpy()
    what = f"tensor-parallel MLP, h={h}, x of shape {tuple(x.shape)}, {world} ranks"
    try:
        out = launch(_graded_tp_rank, world, args=(shard_mlp, tp_mlp_forward, x, W1, b1, W2, b2, guard), timeout=60,
                     collective_timeout=20)
    except LaunchError as e:
        lines = [ln for ln in str(e).splitlines() if ln.strip() and not ln.startswith("(ranks")]
        errors = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", ln)]
        reason = errors[-1] if errors else (lines[-1] if lines else str(e))
        raise GradingError(f"{what}: a rank failed: {reason}") from None
    for rank, r in enumerate(out):
        calls = {op: c for op, (c, _) in r["comm"].items()}
        expect_equal(calls, {"all_reduce": 1}, f"{what}: collectives issued by rank {rank} in tp_mlp_forward",
                     hint="Exactly one dist.all_reduce of the partial outputs, and no other collective.")
        expect_equal(int(r["comm"]["all_reduce"][1]), x.numel() * 4, f"{what}: bytes all-reduced by rank {rank}",
                     hint="The all-reduce sums the (batch, seq, h) partial output, nothing larger.")
        expect_close(r["y"], expected, f"{what}: output of rank {rank} against the unsharded MLP", rtol=1e-4, atol=1e-5,
                     hint="GELU on the local columns, multiply by the W2 rows, all-reduce, then add b2 once.")


def check_shards(shard_mlp, seed, h, world) -> None:
    """shard_mlp(W1, b1, W2, rank, world) for every rank against the r-th of `world` equal blocks
    (`torch.chunk`): columns of W1 and b1, rows of W2; shapes, then values."""
    from solutions_lib.grading import expect_close, expect_equal

    g = torch.Generator().manual_seed(seed)
    W1, b1, W2 = torch.randn(h, 4 * h, generator=g), torch.randn(4 * h, generator=g), torch.randn(4 * h, h, generator=g)
    cols, bs, rows = torch.chunk(W1, world, dim=1), torch.chunk(b1, world), torch.chunk(W2, world, dim=0)
    for rank in range(world):
        W1_s, b1_s, W2_s = shard_mlp(W1, b1, W2, rank, world)
        for got, exp, name in ((W1_s, cols[rank], "W1_shard"), (b1_s, bs[rank], "b1_shard"), (W2_s, rows[rank], "W2_shard")):
            expect_equal(tuple(got.shape), tuple(exp.shape), f"shard_mlp(h={h}, rank={rank}, world_size={world}): shape of {name}")
            expect_close(got, exp, f"shard_mlp(h={h}, rank={rank}, world_size={world}): values of {name}",
                         hint="Rank r takes the r-th of world_size equal blocks: columns of W1 and b1, rows of W2.")
