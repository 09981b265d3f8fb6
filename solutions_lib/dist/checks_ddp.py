"""Grading harnesses of assignment 10 exercises 1: data parallelism by hand.

Rank functions (give them to `launch_graded`, with the student's function or class as the first
argument after ``rank, world``) train a fresh `LabNet` on this rank's micro-batches with the
student's synchroniser inside ``no_delegation`` (torch's DDP and `solutions_lib.dist.ddp` are
forbidden) and measure what the exercise teaches:

* `check_naive_sync` / `check_bucketed_sync`: parameters after a few AdamW steps equal gradient
  accumulation in one process (`lab_reference`), bitwise or to 1e-6; return the parameters so the
  test can compare the replicas (`expect_replicas_agree`).
* `count_naive_sync` / `count_bucketed_sync`: all-reduce calls and bytes counted with
  `CommCounter`; for buckets also the hooks fired and whether a bucket was in flight before the
  last gradient of backward was ready (a hook the test registers itself).
* `check_bad_cap`: the bucketed synchroniser rejects a bad cap and accepts a cap of 1 byte.

Grader-side helpers (plain functions of data, for cells that keep their own ``no_delegation``):

* `draw_lab_cfg(gen, ...)`: a random `LabNet` configuration from the caller's generator.
* `torch_bucket_cases(gen, n, exact)`: bucket plans computed by torch's own bucket assignment.
* `expect_bucket_plans(got, cases)`: the student's plans against those.
"""
from __future__ import annotations

import importlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..grading import expect_accepts, expect_equal, expect_own, expect_raises, expect_true, no_delegation
from .counting import CommCounter
from .ddp import bucket_plan as _torch_rule_plan, grad_sizes_reverse, trainable_parameters
from .ddp_lab import LabNet, lab_batches, lab_reference, train_on_rank

__all__ = ["forbidden", "draw_lab_cfg", "check_naive_sync", "count_naive_sync", "check_bucketed_sync",
           "count_bucketed_sync", "check_bad_cap", "expect_replicas_agree", "torch_bucket_cases",
           "expect_bucket_plans"]


def forbidden() -> tuple:
    """What a synchroniser may not use: torch's DistributedDataParallel and the course's DDP module."""
    return (DistributedDataParallel, importlib.import_module("solutions_lib.dist.ddp"))


def draw_lab_cfg(gen: torch.Generator, *, d=(4, 11), depth=(2, 5), frozen_layer=None, tied=None) -> dict:
    """A `LabNet` configuration drawn from `gen` (vocab, width, depth, seed; then the frozen layer
    and tying, unless given). `d` and `depth` are (low, high) bounds of torch.randint."""
    cfg = dict(vocab=int(torch.randint(7, 20, (1,), generator=gen)), d=int(torch.randint(*d, (1,), generator=gen)),
               depth=int(torch.randint(*depth, (1,), generator=gen)), seed=int(torch.randint(0, 10**6, (1,), generator=gen)))
    cfg["frozen_layer"] = int(torch.randint(0, cfg["depth"], (1,), generator=gen)) if frozen_layer is None else frozen_layer
    cfg["tied"] = bool(torch.randint(0, 2, (1,), generator=gen)) if tied is None else tied
    return cfg


def _expect_matches(model, expected, exact, what, steps, oracle, advice):
    """Every parameter of `model` equals `expected[name]` (bitwise when `exact`, else to 1e-6)."""
    for name, p in model.named_parameters():
        same = torch.equal(p, expected[name]) if exact else torch.allclose(p, expected[name], rtol=0, atol=1e-6)
        expect_true(same, f"{what}: parameter '{name}' after {steps} AdamW steps differs from {oracle} (max |diff| = "
                          f"{float((p - expected[name]).detach().abs().max()):.3g}). {advice}")


def check_naive_sync(rank, world, sync_gradients, cfg, data_seed, steps, extra_ranks, exact):
    """Rank function: `sync_gradients(model)` after each backward makes `LabNet(**cfg)` end where
    gradient accumulation in one process ends (bitwise when `exact`, else to 1e-6). Returns the
    parameters."""
    batches = lab_batches(world, steps, vocab=cfg["vocab"], seed=data_seed, extra_ranks=extra_ranks)
    ref = LabNet(**cfg)
    lab_reference(ref, batches)
    expected = dict(ref.named_parameters())
    model = LabNet(**cfg)
    expect_own(sync_gradients, "sync_gradients", *forbidden())
    with no_delegation("sync_gradients", *forbidden()):
        train_on_rank(model, rank, batches, lambda: sync_gradients(model))
    _expect_matches(model, expected, exact, f"sync_gradients on {world} ranks", steps,
                    "gradient accumulation in one process", "Did you SUM and then divide by the world size, skip frozen parameters, and send zeros for a "
                    "gradient that is None?")
    return [p.detach().clone() for p in model.parameters()]


def count_naive_sync(rank, world, sync_gradients, cfg, steps):
    """Rank function: one all-reduce per trainable tensor per step (tied once, frozen never), the
    bytes of every trainable gradient once per step, counted with `CommCounter`."""
    batches = lab_batches(world, steps, vocab=cfg["vocab"], seed=5, extra_ranks=(0,))
    model = LabNet(**cfg)
    n_tensors = len(trainable_parameters(model))
    nbytes = sum(grad_sizes_reverse(model))   # every trainable gradient's bytes, tied once, frozen excluded
    with no_delegation("sync_gradients", *forbidden()), CommCounter() as comm:
        train_on_rank(model, rank, batches, lambda: sync_gradients(model))
    expect_equal(comm.calls["all_reduce"], steps * n_tensors,
                 f"all_reduce calls in {steps} steps ({n_tensors} trainable tensors; frozen ones are not sent, "
                 "a tied one is sent once)", hint="One all_reduce per trainable parameter per step.")
    expect_equal(comm.bytes["all_reduce"], steps * int(nbytes), f"all_reduce bytes in {steps} steps",
                 hint="Every trainable gradient once per step, 4 bytes per fp32 element.")


def check_bucketed_sync(rank, world, sync_cls, cfg, cap, data_seed, steps, extra_ranks, exact):
    """Rank function: `sync_cls(model, cap)` with `finish()` after each backward makes `LabNet(**cfg)`
    end where gradient accumulation ends. Returns the parameters."""
    batches = lab_batches(world, steps, vocab=cfg["vocab"], seed=data_seed, extra_ranks=extra_ranks)
    ref = LabNet(**cfg)
    lab_reference(ref, batches)
    expected = dict(ref.named_parameters())
    model = LabNet(**cfg)
    expect_own(sync_cls, "BucketedSync", *forbidden())
    with no_delegation("BucketedSync", *forbidden()):
        sync = sync_cls(model, cap)
        train_on_rank(model, rank, batches, sync.finish)
    _expect_matches(model, expected, exact, f"BucketedSync on {world} ranks (cap {cap} bytes)", steps,
                    "gradient accumulation", "Check the buffer offsets, the division by the world size, and that finish() copies every "
                    "averaged slice back.")
    return [p.detach().clone() for p in model.parameters()]


def count_bucketed_sync(rank, world, sync_cls, cfg, cap, steps):
    """Rank function: one all-reduce per bucket of the reference bucket rule per step, the bytes of
    every trainable gradient once, one hook call per trainable tensor, at least one bucket launched
    from a hook per step, and an all-reduce already issued when the embedding's gradient (the last
    of backward) is ready: measured by a hook the test registers before the student's."""
    model = LabNet(**cfg)
    batches = lab_batches(world, steps, vocab=cfg["vocab"], seed=3, extra_ranks=tuple(range(world)))
    n_trainable = sum(p.requires_grad for p in model.parameters())
    n_buckets = len(_torch_rule_plan(grad_sizes_reverse(model), cap))
    nbytes = sum(grad_sizes_reverse(model))   # every trainable gradient's bytes, tied once, frozen excluded
    first = [p for p in model.parameters() if p.requires_grad][:1]   # the embedding: its gradient comes last
    seen_before_last = []
    with no_delegation("BucketedSync", *forbidden()), CommCounter() as comm:
        for p in first:  # registered before yours, so it runs first: how many all_reduce calls so far?
            p.register_post_accumulate_grad_hook(lambda p: seen_before_last.append(comm.calls["all_reduce"]))
        sync = sync_cls(model, cap)
        train_on_rank(model, rank, batches, sync.finish)
    expect_equal(comm.calls["all_reduce"], steps * n_buckets,
                 f"all_reduce calls in {steps} steps with cap {cap} bytes ({n_buckets} buckets per step)",
                 hint="One all_reduce per bucket per step, buckets as your bucket_plan over reverse parameter order.")
    expect_equal(comm.bytes["all_reduce"], steps * nbytes, f"all_reduce bytes in {steps} steps",
                 hint="Frozen parameters are not sent; a tied parameter is sent once.")
    expect_equal(sync.hooks_fired, steps * n_trainable, f"hooks_fired after {steps} steps ({n_trainable} trainable tensors)",
                 hint="Register one post-accumulate-grad hook per trainable parameter of model.parameters().")
    expect_true(sync.launched_from_hook >= steps,
                f"only {sync.launched_from_hook} buckets were launched from a hook in {steps} steps: launch each "
                "bucket as soon as its last gradient is ready, not in finish().")
    expect_true(len(seen_before_last) == steps and min(seen_before_last) >= 1,
                f"all_reduce calls issued before the embedding's gradient (the last of backward) was ready: "
                f"{seen_before_last}; at least one bucket must start while backward is still running.")
    expect_equal(sync.launched_from_hook + sync.launched_at_finish, steps * n_buckets,
                 "launched_from_hook + launched_at_finish")


def check_bad_cap(rank, world, sync_cls, cap):
    """Rank function: `sync_cls(model, cap)` raises ValueError for the bad `cap`; a cap of 1 byte
    (one bucket per tensor) is accepted."""
    expect_raises(lambda: sync_cls(LabNet(vocab=13, seed=0), cap), ValueError, f"BucketedSync(model, bucket_cap_bytes={cap})",
                  hint="Check the cap before anything else (bucket_plan raises for it).")
    expect_accepts(lambda: sync_cls(LabNet(vocab=13, seed=0), 1), "BucketedSync(model, bucket_cap_bytes=1): one bucket per tensor")
    return True


def expect_replicas_agree(out: list, what: str, advice: str = "") -> None:
    """`out[r]` are the parameters rank r returned: every rank must end with rank 0's, bitwise."""
    for r in range(1, len(out)):
        expect_true(all(torch.equal(a, b) for a, b in zip(out[0], out[r])),
                    f"{what} on {len(out)} ranks: rank {r} ends with parameters different from rank 0{advice}.")


def torch_bucket_cases(gen: torch.Generator, n: int, exact: list[tuple[list[int], int]]) -> list[tuple]:
    """`n` random (sizes in bytes, cap, plan) cases drawn from `gen`, then one for each (numels, cap)
    of `exact`; every plan is torch's own `_compute_bucket_assignment_by_size` on fp32 tensors."""
    cases = []

    def add(numels, cap):
        torch_plan, _ = dist._compute_bucket_assignment_by_size([torch.zeros(k) for k in numels], [cap])
        cases.append(([4 * k for k in numels], cap, [list(b) for b in torch_plan]))
    for _ in range(n):
        numels = torch.randint(1, 500, (int(torch.randint(1, 20, (1,), generator=gen)),), generator=gen).tolist()
        add(numels, int(torch.randint(4, 4000, (1,), generator=gen)))
    for numels, cap in exact:
        add(numels, cap)
    return cases


def expect_bucket_plans(got: list, cases: list[tuple]) -> None:
    """The plans `got[i]` (lists of index lists) equal the plans of `cases[i] = (sizes, cap, plan)`."""
    for (s, c, want), g in zip(cases, got):
        expect_equal([list(b) for b in g], want, f"bucket_plan({s}, {c})")
