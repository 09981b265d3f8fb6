"""Are the replicas still identical? Parameter-sync checks at O(1) communication (CH26-03).

Data parallelism assumes every rank holds the same parameters. A bug (a rank that skipped a
step, a non-deterministic op, a bit flip) breaks that silently. A check must compare the
ranks without sending the model:

* weak: the sum of all parameters (one number). Blind to any change that keeps the sum:
  two swapped elements, +d on one and -d on another.
* projections: k numbers <r_j, theta>, with random vectors r_j drawn from a seed every rank
  shares (so every rank projects on the same r_j). Any difference delta != 0 changes
  <r_j, delta> with probability 1 for Gaussian r_j. k*8 bytes per rank.
* hash: sha256 of the exact parameter bytes, as 4 int64 words (32 bytes per rank). Catches
  any bit difference; needs bitwise-identical replicas (true for DDP on one kind of device).

`verify_parameter_sync` all-gathers the fingerprints (world_size * m numbers, independent of
the model size) and returns the ranks that disagree with rank 0 (the rank DDP broadcasts
from). `best_check_interval` picks how often to run it: the expected cost per step of
checking every T steps is c/T + r*s*(T+1)/2 (c: seconds per check, r: desyncs per step,
s: seconds per step; a desync wastes on average (T+1)/2 steps before the next check finds
it), minimised at T* = sqrt(2c/(r s)) (the same square root as Young's checkpoint interval).
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
import torch
import torch.distributed as dist

from .._checks import choice, non_negative, positive

__all__ = ["flat_parameters", "weak_fingerprint", "projection_fingerprint", "hash_fingerprint",
           "fingerprint", "verify_parameter_sync", "swap_elements", "shift_keep_sum",
           "check_cost_per_step", "best_check_interval", "simulate_check_cost"]


def flat_parameters(module_or_tensors) -> torch.Tensor:
    """All parameters (a Module's, or a list of tensors) as one flat CPU tensor, in order."""
    if isinstance(module_or_tensors, torch.nn.Module):
        ts = list(module_or_tensors.parameters())
    elif isinstance(module_or_tensors, torch.Tensor):
        ts = [module_or_tensors]
    else:
        ts = list(module_or_tensors)
    if not ts:
        raise ValueError("no parameters to fingerprint")
    return torch.cat([t.detach().reshape(-1).cpu() for t in ts])


def weak_fingerprint(module_or_tensors) -> float:
    """The sum of every parameter value (math.fsum: exactly rounded, so the order of the terms
    does not matter). One number; blind to any change that keeps the sum."""
    return math.fsum(flat_parameters(module_or_tensors).double().tolist())


def projection_fingerprint(module_or_tensors, k: int = 4, seed: int = 0) -> torch.Tensor:
    """k float64 numbers <r_j, theta>, r_j ~ N(0, I) drawn from torch.Generator(seed): every rank
    that uses the same seed projects on the same vectors."""
    positive("k", k, integer=True)
    theta = flat_parameters(module_or_tensors).double()
    g = torch.Generator().manual_seed(int(seed))
    r = torch.randn(int(k), theta.numel(), generator=g, dtype=torch.float64)
    return r @ theta


def hash_fingerprint(module_or_tensors) -> torch.Tensor:
    """sha256 of the exact bytes of the flat parameters, as 4 int64 words (32 bytes)."""
    theta = flat_parameters(module_or_tensors).contiguous()
    digest = hashlib.sha256(theta.view(torch.uint8).numpy().tobytes()).digest()
    return torch.tensor(np.frombuffer(digest, dtype=np.int64).copy())


def fingerprint(module_or_tensors, method: str = "hash", k: int = 4, seed: int = 0) -> torch.Tensor:
    """A small 1-D tensor summarising the parameters: "sum" (1 float64), "projection"
    (k float64) or "hash" (4 int64)."""
    choice("method", method, {"sum", "projection", "hash"})
    if method == "sum":
        return torch.tensor([weak_fingerprint(module_or_tensors)], dtype=torch.float64)
    if method == "projection":
        return projection_fingerprint(module_or_tensors, k, seed)
    return hash_fingerprint(module_or_tensors)


def verify_parameter_sync(module_or_tensors, method: str = "hash", k: int = 4, seed: int = 0,
                          rtol: float = 0.0, group=None) -> list[int]:
    """Run on every rank: the ranks whose parameters differ from rank 0's (empty when in sync).

    One all-gather (all_gather_single) of world_size * m numbers (m = 1 sum, k projections, 4 hash
    words): O(1) in the model size. rtol: relative tolerance on float fingerprints (0 = exact;
    the textbook's weak check compares its sum with a tolerance, e.g. 1e-6).
    """
    non_negative("rtol", rtol)
    if not dist.is_initialized():
        raise ValueError("verify_parameter_sync needs an initialised process group (use launch)")
    fp = fingerprint(module_or_tensors, method, k, seed)
    world = dist.get_world_size(group)
    out = torch.empty(world * fp.numel(), dtype=fp.dtype)
    _all_gather_flat(out, fp, group)
    rows = out.view(world, -1)
    bad = []
    for r in range(1, world):
        if fp.dtype.is_floating_point:
            same = torch.allclose(rows[r], rows[0], rtol=rtol, atol=0.0)
        else:
            same = torch.equal(rows[r], rows[0])
        if not same:
            bad.append(r)
    return bad


def _all_gather_flat(out, inp, group):
    """all_gather_single where torch has it (2.13 deprecates all_gather_into_tensor)."""
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, inp, group=group)


# ---------------------------------------------------------------- desyncs the sum cannot see


def swap_elements(module_or_tensor, i: int = 0, j: int = 1) -> None:
    """Swap flat elements i and j of a parameter (in place): the sum is exactly unchanged."""
    t = module_or_tensor if isinstance(module_or_tensor, torch.Tensor) else next(module_or_tensor.parameters())
    flat = t.data.view(-1)
    if not (0 <= i < flat.numel() and 0 <= j < flat.numel()) or i == j:
        raise ValueError(f"need two distinct indices in [0, {flat.numel()}), got {i}, {j}")
    if flat[i] == flat[j]:
        raise ValueError("elements i and j are equal: swapping them changes nothing")
    a, b = flat[i].clone(), flat[j].clone()
    flat[i], flat[j] = b, a


def shift_keep_sum(module_or_tensor, d: float = 1e-3, i: int = 0, j: int = 1) -> None:
    """Add +d to flat element i and -d to element j of a parameter (in place): the sum moves
    only by float rounding (far below a 1e-6 relative tolerance)."""
    positive("d", d)
    t = module_or_tensor if isinstance(module_or_tensor, torch.Tensor) else next(module_or_tensor.parameters())
    flat = t.data.view(-1)
    if not (0 <= i < flat.numel() and 0 <= j < flat.numel()) or i == j:
        raise ValueError(f"need two distinct indices in [0, {flat.numel()}), got {i}, {j}")
    flat[i] += d
    flat[j] -= d


# ---------------------------------------------------------------- how often to check


def _cadence_args(check_cost_s, desync_rate_per_step, step_time_s):
    positive("check_cost_s", check_cost_s)
    positive("desync_rate_per_step", desync_rate_per_step)
    positive("step_time_s", step_time_s)
    if desync_rate_per_step >= 1:
        raise ValueError(f"desync_rate_per_step is a probability per step, < 1; got {desync_rate_per_step}")


def check_cost_per_step(interval: int, check_cost_s: float, desync_rate_per_step: float,
                        step_time_s: float) -> float:
    """Expected seconds lost per training step when checking every `interval` steps:
    check_cost_s / T + r * step_time_s * (T + 1) / 2.

    A desync in step j of an interval of T steps (j uniform in 1..T) is found by the check after
    step T, so T - j + 1 steps (mean (T+1)/2) trained on a broken replica and are redone.
    """
    positive("interval", interval, integer=True)
    _cadence_args(check_cost_s, desync_rate_per_step, step_time_s)
    T = int(interval)
    return check_cost_s / T + desync_rate_per_step * step_time_s * (T + 1) / 2


def best_check_interval(check_cost_s: float, desync_rate_per_step: float, step_time_s: float,
                        integer: bool = True):
    """The interval T (steps) that minimises check_cost_per_step: T* = sqrt(2 c / (r s)).

    integer=True returns the better of floor(T*) and ceil(T*) (at least 1): the cost is convex
    in T, so one of the two integers next to T* is the integer minimum.
    """
    _cadence_args(check_cost_s, desync_rate_per_step, step_time_s)
    t_star = math.sqrt(2 * check_cost_s / (desync_rate_per_step * step_time_s))
    if not integer:
        return t_star
    cands = {max(1, math.floor(t_star)), max(1, math.ceil(t_star))}
    return min(sorted(cands), key=lambda T: check_cost_per_step(T, check_cost_s, desync_rate_per_step,
                                                                step_time_s))


def simulate_check_cost(interval: int, check_cost_s: float, desync_rate_per_step: float,
                        step_time_s: float, n_steps: int = 200_000, seed: int = 0) -> float:
    """Monte Carlo of the same model: desyncs strike each step with probability r; the run checks
    every `interval` steps; a desync costs the steps from it to the check. Returns seconds lost
    per step (checks + wasted steps) / n_steps: the oracle for check_cost_per_step."""
    positive("interval", interval, integer=True)
    positive("n_steps", n_steps, integer=True)
    _cadence_args(check_cost_s, desync_rate_per_step, step_time_s)
    T = int(interval)
    rng = np.random.default_rng(seed)
    hits = rng.random(n_steps) < desync_rate_per_step
    steps = np.arange(n_steps)
    next_check = (steps // T + 1) * T  # the check after this step's interval (step indices 0-based)
    wasted = np.where(hits, next_check - steps, 0).sum()
    return (n_steps / T * check_cost_s + wasted * step_time_s) / n_steps
