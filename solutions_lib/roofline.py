"""A measured roofline: time matrix multiplications on this machine, fit the two roofs.

The roofline model (Williams, Waterman, Patterson 2009) bounds the speed of a kernel by
min(peak FLOP/s, arithmetic intensity x memory bandwidth). Here both roofs come from
measurements: the peak is the best FLOP/s any GEMM reached, the bandwidth the best
FLOP/s-per-(FLOP/byte) of the memory-bound ones. Timings are wall-clock seconds
(`time.perf_counter`); a roof is a ceiling, so every estimate takes the *best* of several
trials (noise from other processes only ever makes a run slower).

Units: seconds, FLOPs, FLOP/s, bytes, bytes/s, FLOP/byte.
"""
from __future__ import annotations

import copy
import time

import numpy as np
import torch

from ._checks import positive

__all__ = ["gemm_flops", "time_gemm", "measure_gemms", "fit_roofline", "copy_bandwidth",
           "training_tokens_per_second"]


def gemm_flops(m: int, n: int, k: int) -> float:
    """FLOPs of C = A B with A (m x k) and B (k x n): 2 m n k (one multiply and one add per term)."""
    for name, v in (("m", m), ("n", n), ("k", k)):
        positive(name, v, integer=True)
    return 2.0 * m * n * k


def _trial(fn, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return time.perf_counter() - start


def _best_seconds_per_call(fn, min_time: float, trials: int) -> float:
    fn()  # warm-up: first-call costs (allocation, kernel selection, caches) are not the kernel's speed
    repeats = 1
    while True:
        t = _trial(fn, repeats)
        if t >= min_time or repeats >= 1 << 20:
            break
        repeats = max(2 * repeats, int(repeats * 1.2 * min_time / max(t, 1e-9)))
    best = t / repeats
    for _ in range(trials - 1):
        best = min(best, _trial(fn, repeats) / repeats)
    return best


def time_gemm(m: int, n: int, k: int, *, dtype=torch.float32, min_time: float = 0.01,
              trials: int = 3, seed: int = 0) -> float:
    """Seconds per call of `torch.mm` on A (m x k) times B (k x n), best of `trials`.

    The operands are made before timing; one warm-up call; each trial repeats
    the call until it lasts at least `min_time` seconds and divides by the repeats.
    """
    gemm_flops(m, n, k)
    positive("min_time", min_time)
    positive("trials", trials, integer=True)
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    return _best_seconds_per_call(lambda: torch.mm(a, b), min_time, trials)


def measure_gemms(shapes, *, bytes_per_element: float = 4, **timing) -> dict:
    """Time every (m, n, k) in `shapes`; arrays of seconds, FLOP/s and intensity (FLOP/byte).

    Intensity counts the ideal traffic: A and B read once, C written once.
    """
    from .compute import gemm_arithmetic_intensity

    shapes = [tuple(int(x) for x in s) for s in shapes]
    if not shapes:
        raise ValueError("shapes is empty: give at least one (m, n, k)")
    seconds = np.array([time_gemm(m, n, k, **timing) for m, n, k in shapes])
    flops = np.array([gemm_flops(m, n, k) for m, n, k in shapes])
    intensity = np.array([gemm_arithmetic_intensity(m, n, k, bytes_per_element) for m, n, k in shapes])
    return {"shapes": shapes, "seconds": seconds, "flops_per_second": flops / seconds,
            "intensity": intensity}


def fit_roofline(intensity, flops_per_second, memory_bound_below: float = 4.0) -> tuple[float, float]:
    """(peak FLOP/s, bandwidth bytes/s) of the roofline that sits on top of the measured points.

    peak = max(FLOP/s) over all points; bandwidth = max(FLOP/s / intensity) over the points with
    intensity < `memory_bound_below` (those that the memory roof limits). Every point then lies
    on or under min(peak, intensity * bandwidth). The ridge point is peak / bandwidth.
    """
    i = np.asarray(intensity, dtype=float)
    f = np.asarray(flops_per_second, dtype=float)
    if i.shape != f.shape or i.ndim != 1 or i.size == 0:
        raise ValueError(f"intensity and flops_per_second must be 1-D arrays of the same length, "
                         f"got shapes {i.shape} and {f.shape}")
    if not (np.all(np.isfinite(i)) and np.all(np.isfinite(f)) and np.all(i > 0) and np.all(f > 0)):
        raise ValueError("intensities and FLOP/s must all be finite and > 0")
    positive("memory_bound_below", memory_bound_below)
    low = i < memory_bound_below
    if not np.any(low):
        raise ValueError(f"no point has intensity below {memory_bound_below} FLOP/byte: "
                         "add skinny (memory-bound) shapes or raise memory_bound_below")
    return float(f.max()), float(np.max(f[low] / i[low]))


def copy_bandwidth(n_bytes: int = 64 * 2 ** 20, *, min_time: float = 0.02, trials: int = 3) -> float:
    """Memory bandwidth in bytes/s from copying an fp32 buffer of `n_bytes` (read + write counted).

    Pick `n_bytes` well above the last-level cache, or the result is the cache's bandwidth.
    """
    positive("n_bytes", n_bytes, integer=True)
    src = torch.ones(max(int(n_bytes) // 4, 1))
    dst = torch.empty_like(src)
    seconds = _best_seconds_per_call(lambda: dst.copy_(src), min_time, trials)
    return 2.0 * src.numel() * 4 / seconds


def training_tokens_per_second(model: torch.nn.Module, batch_size: int, seq_len: int, vocab: int, *,
                               steps: int = 3, warmup_steps: int = 1, lr: float = 1e-3, seed: int = 0) -> float:
    """Training tokens per second of a next-token language model on random tokens.

    Runs on a deep copy (the caller's model is not trained): AdamW, cross-entropy on shifted
    targets, `warmup_steps` untimed steps, then `steps` timed ones; tokens = batch_size * seq_len
    per step. `model(idx)` must return logits of shape (batch, seq_len, vocab).
    """
    for name, v in (("batch_size", batch_size), ("seq_len", seq_len), ("vocab", vocab), ("steps", steps)):
        positive(name, v, integer=True)
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    model = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, vocab, (batch_size, seq_len + 1), generator=g)
    x, y = data[:, :-1], data[:, 1:]

    def step():
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(warmup_steps):
        step()
    seconds = _trial(step, steps)
    return batch_size * seq_len * steps / seconds
