"""DistributedSampler across epochs, and a detector for a forgotten ``set_epoch`` (CH26-02).

``torch.utils.data.DistributedSampler`` shuffles with ``torch.Generator().manual_seed(seed + epoch)``
and gives rank r the indices ``perm[r::num_replicas]`` (after padding the permutation to a multiple
of num_replicas). ``epoch`` only changes when the training loop calls ``sampler.set_epoch(e)``:
forget it and every epoch replays epoch 0's order, on every rank.

Nothing crashes when that happens. What shows is the loss curve: step s of epoch e+1 sees the
same batch as step s of epoch e, so the batch-to-batch wiggles of the per-step loss repeat
epoch after epoch. `epoch_repeat_score` measures that repetition (the correlation of the
detrended per-step losses of consecutive epochs) and `detect_missing_set_epoch` thresholds it.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from .._checks import positive

__all__ = ["sampler_orders", "dp_training_losses", "epoch_repeat_score", "detect_missing_set_epoch",
           "detector_separation"]


def sampler_orders(n_samples: int, num_replicas: int, epochs: int, *, set_epoch: bool = True,
                   seed: int = 0, shuffle: bool = True, drop_last: bool = False) -> list[list[list[int]]]:
    """orders[epoch][rank] = the list of dataset indices that rank reads in that epoch.

    Built from DistributedSampler itself (one sampler per rank, as each process would hold);
    `set_epoch=False` reproduces the bug: the loop never calls ``sampler.set_epoch(epoch)``.
    """
    positive("n_samples", n_samples, integer=True)
    positive("num_replicas", num_replicas, integer=True)
    positive("epochs", epochs, integer=True)
    samplers = [DistributedSampler(range(n_samples), num_replicas=num_replicas, rank=r, shuffle=shuffle,
                                   seed=seed, drop_last=drop_last) for r in range(num_replicas)]
    orders = []
    for e in range(epochs):
        if set_epoch:
            for s in samplers:
                s.set_epoch(e)
        orders.append([list(iter(s)) for s in samplers])
    return orders


def _regression_data(n_samples: int, dim: int, seed: int):
    """y = x.w* + noise whose scale varies strongly from sample to sample (some samples are
    'hard'), so a batch's loss depends on which samples it holds."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_samples, dim, generator=g)
    w = torch.randn(dim, generator=g)
    noise_scale = torch.exp(1.0 * torch.randn(n_samples, generator=g))
    y = x @ w + noise_scale * torch.randn(n_samples, generator=g)
    return x, y


def dp_training_losses(set_epoch: bool, *, world_size: int = 2, epochs: int = 6, n_samples: int = 192,
                       batch_per_rank: int = 4, dim: int = 8, lr: float = 0.05, seed: int = 0,
                       data_seed: int | None = None, rank=None) -> np.ndarray:
    """Per-step training losses of a data-parallel run, shape (epochs, steps_per_epoch).

    A linear model trained with SGD on `world_size` ranks simulated in one process: every rank
    holds a DistributedSampler(num_replicas=world_size, rank=r, seed=seed), takes its next
    `batch_per_rank` indices, computes its gradient; the gradients are averaged (what DDP's
    all-reduce does) and every replica takes the same step. `set_epoch` says whether the loop
    calls ``sampler.set_epoch(epoch)``. The logged loss is the mean of the ranks' batch losses
    (an all-reduced loss, `rank=None`) or one rank's own batch loss (`rank=0`: a loop that
    logs on rank 0 without reducing).
    """
    positive("world_size", world_size, integer=True)
    positive("epochs", epochs, integer=True)
    positive("batch_per_rank", batch_per_rank, integer=True)
    positive("lr", lr)
    if rank is not None and not (isinstance(rank, int) and 0 <= rank < world_size):
        raise ValueError(f"rank must be None or an int in [0, {world_size}), got {rank!r}")
    x, y = _regression_data(n_samples, dim, seed if data_seed is None else data_seed)
    orders = sampler_orders(n_samples, world_size, epochs, set_epoch=set_epoch, seed=seed, drop_last=True)
    per_rank = len(orders[0][0])
    steps = per_rank // batch_per_rank
    if steps < 2:
        raise ValueError(f"need at least 2 steps per epoch, got {steps} "
                         f"({n_samples} samples, {world_size} ranks, batch {batch_per_rank})")
    w = torch.zeros(dim)
    losses = np.zeros((epochs, steps))
    for e in range(epochs):
        for s in range(steps):
            grad = torch.zeros(dim)
            rank_losses = []
            for r in range(world_size):
                idx = torch.tensor(orders[e][r][s * batch_per_rank:(s + 1) * batch_per_rank])
                err = x[idx] @ w - y[idx]
                rank_losses.append(float((err ** 2).mean()) / 2)
                grad += x[idx].T @ err / len(idx)
            w -= lr * grad / world_size
            losses[e, s] = rank_losses[rank] if rank is not None else float(np.mean(rank_losses))
    return losses


def _detrended(rows: np.ndarray) -> np.ndarray:
    t = np.arange(rows.shape[1], dtype=np.float64)
    out = np.empty_like(rows, dtype=np.float64)
    for i, r in enumerate(rows):
        slope, icpt = np.polyfit(t, r, 1)
        out[i] = r - (slope * t + icpt)
    return out


def epoch_repeat_score(losses, steps_per_epoch: int | None = None) -> float:
    """Median over consecutive epoch pairs of corr(loss[e, :], loss[e+1, :]) after removing a
    straight-line trend from each epoch's losses. Dimensionless, in [-1, 1].

    Batches that repeat in the same order (no set_epoch) give a score near 1: the same hard
    batch comes at the same step every epoch. Reshuffled batches give a score near 0.
    `losses` is either (epochs, steps) or a flat per-step sequence with `steps_per_epoch`.
    With few steps per epoch the correlation is noisy: on `dp_training_losses` runs, at 24 or
    more steps per epoch healthy runs score below 0.4 and buggy runs above 0.9; at 6 steps
    per epoch the two overlap.
    """
    a = np.asarray(losses, dtype=np.float64)
    if a.ndim == 1:
        if steps_per_epoch is None:
            raise ValueError("a flat loss sequence needs steps_per_epoch")
        positive("steps_per_epoch", steps_per_epoch, integer=True)
        n = len(a) // steps_per_epoch
        a = a[:n * steps_per_epoch].reshape(n, steps_per_epoch)
    if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] < 3:
        raise ValueError(f"need at least 2 full epochs of at least 3 steps, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("losses contain nan or inf")
    d = _detrended(a)
    corrs = []
    for e in range(a.shape[0] - 1):
        u, v = d[e], d[e + 1]
        den = np.linalg.norm(u) * np.linalg.norm(v)
        corrs.append(float(u @ v / den) if den > 0 else 0.0)
    return float(np.median(corrs))


def detect_missing_set_epoch(losses, steps_per_epoch: int | None = None, threshold: float = 0.6) -> bool:
    """True when the loss curve says the epochs replay the same batch order (set_epoch missing):
    epoch_repeat_score(losses) > threshold."""
    if not -1 < threshold < 1:
        raise ValueError(f"threshold must lie in (-1, 1), got {threshold!r}")
    return epoch_repeat_score(losses, steps_per_epoch) > threshold


def detector_separation(seeds, **run_kwargs) -> dict:
    """Scores of healthy (set_epoch) and buggy (no set_epoch) runs over `seeds`:
    {"healthy": [...], "buggy": [...], "gap": min(buggy) - max(healthy)}."""
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must not be empty")
    healthy = [epoch_repeat_score(dp_training_losses(True, seed=s, **run_kwargs)) for s in seeds]
    buggy = [epoch_repeat_score(dp_training_losses(False, seed=s, **run_kwargs)) for s in seeds]
    return {"healthy": healthy, "buggy": buggy, "gap": min(buggy) - max(healthy)}
