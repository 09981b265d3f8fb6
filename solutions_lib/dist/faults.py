"""Fault injection for a data-parallel run: what each fault looks like and what catches it.

1. A hung collective: one rank skips an all_reduce (a data-dependent branch, an exception
   swallowed on one rank). Its peer waits forever unless the process group has a timeout:
   `launch(..., collective_timeout=2)` turns the hang into a LaunchError within seconds.
2. A non-finite gradient: with a loss scaler (torch.amp.GradScaler), a step whose gradients
   hold inf/nan is skipped (parameters unchanged) and the scale is multiplied by
   backoff_factor (0.5).
3. A desynced rank: one replica's parameters differ while their sum does not: the weak
   (sum) check passes it, the strong (hash / projection) check names the rank.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .._checks import positive
from .launch import LaunchError, launch
from .sync import shift_keep_sum, swap_elements, verify_parameter_sync

__all__ = ["skip_one_all_reduce", "run_hung_collective", "grad_scaler_nan_step", "desync_rank",
           "run_desync_check"]


def skip_one_all_reduce(rank: int, world_size: int, skip_rank: int = 1, stall_s: float = 30.0) -> float:
    """A rank function with the bug: `skip_rank` skips the all_reduce (and goes on working for
    `stall_s` seconds), the other ranks wait in it. Returns the reduced value if nothing hangs."""
    t = torch.ones(4) * (rank + 1)
    if rank == skip_rank:
        time.sleep(stall_s)
    else:
        dist.all_reduce(t)
    return float(t.sum())


def run_hung_collective(world_size: int = 2, skip_rank: int = 1, collective_timeout: float = 2.0,
                        timeout: float = 60.0) -> dict:
    """Run `skip_one_all_reduce` under `launch`; return {"failed": bool, "seconds": wall time of
    the run, "message": the LaunchError text (or "")}. With a collective timeout of c seconds
    the waiting rank raises after about c s."""
    positive("collective_timeout", collective_timeout)
    if not 0 <= skip_rank < world_size:
        raise ValueError(f"skip_rank must lie in [0, {world_size}), got {skip_rank}")
    t0 = time.monotonic()
    try:
        launch(skip_one_all_reduce, world_size, args=(skip_rank, 4 * collective_timeout + 10),
               collective_timeout=collective_timeout, timeout=timeout)
        failed, msg = False, ""
    except LaunchError as e:
        failed, msg = True, str(e)
    return {"failed": failed, "seconds": time.monotonic() - t0, "message": msg}


class _PlainSGD:
    """The part of an optimizer GradScaler uses (param_groups, step): p <- p - lr * grad."""

    def __init__(self, params, lr):
        self.param_groups = [{"params": list(params)}]
        self.lr = lr

    @torch.no_grad()
    def step(self):
        for p in self.param_groups[0]["params"]:
            if p.grad is not None:
                p -= self.lr * p.grad


def grad_scaler_nan_step(n_steps: int = 5, bad_step: int = 2, bad_value: float = float("nan"),
                         lr: float = 0.1, init_scale: float = 2.0 ** 10, seed: int = 0) -> dict:
    """Train a tiny linear model with torch.amp.GradScaler("cpu"); at `bad_step` one gradient
    entry is overwritten with `bad_value` (nan or inf) before scaler.step.

    Returns {"params": [flat params after each step], "scales": [scale used at each step],
    "skipped": [was the step skipped], "initial": flat params before training}.
    """
    positive("n_steps", n_steps, integer=True)
    if not 0 <= bad_step < n_steps:
        raise ValueError(f"bad_step must lie in [0, {n_steps}), got {bad_step}")
    if torch.isfinite(torch.tensor(bad_value)):
        raise ValueError(f"bad_value must be nan or inf, got {bad_value}")
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    x, y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
    opt = _PlainSGD(model.parameters(), lr)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    flat = lambda: torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()  # noqa: E731
    out = {"initial": flat(), "params": [], "scales": [], "skipped": []}
    for step in range(n_steps):
        for p in model.parameters():
            p.grad = None
        loss = ((model(x) - y) ** 2).mean()
        scaler.scale(loss).backward()
        if step == bad_step:
            model.weight.grad.view(-1)[0] = bad_value
        before = flat()
        out["scales"].append(scaler.get_scale())
        scaler.step(opt)
        scaler.update()
        out["params"].append(flat())
        out["skipped"].append(bool(torch.equal(before, out["params"][-1])))
    return out


def desync_rank(rank: int, world_size: int, bad_rank: int = 1, how: str = "swap", seed: int = 0,
                hidden: int = 16) -> dict:
    """Rank function: every rank builds the same seeded model; `bad_rank` gets a sum-preserving
    perturbation ("swap" two weights, or "shift" +d/-d). Returns what each check reports:
    {"weak": ranks flagged by the sum (rtol 1e-6), "hash": ..., "projection": ...}."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))
    if rank == bad_rank:
        if how == "swap":
            swap_elements(model[0].weight, 0, 1)
        elif how == "shift":
            shift_keep_sum(model[0].weight, 1e-3, 0, 1)
        else:
            raise ValueError(f"how must be 'swap' or 'shift', got {how!r}")
    return {"weak": verify_parameter_sync(model, "sum", rtol=1e-6),
            "hash": verify_parameter_sync(model, "hash"),
            "projection": verify_parameter_sync(model, "projection", k=4, seed=seed)}


def run_desync_check(world_size: int = 3, bad_rank: int = 1, how: str = "swap", seed: int = 0) -> dict:
    """`desync_rank` on `world_size` gloo ranks; rank 0's report (every rank gets the same)."""
    if not 0 < bad_rank < world_size:
        raise ValueError(f"bad_rank must lie in [1, {world_size}) (rank 0 is the reference), got {bad_rank}")
    return launch(desync_rank, world_size, args=(bad_rank, how, seed))[0]
