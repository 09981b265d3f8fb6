"""Checks of 05 communication (exercises), kept here so that each test cell reads as a few lines of
intent.

The case generators draw a hidden test's inputs from the seed the test cell passes (the cell keeps
its own `term_seed(...)` literal); the cell computes the expected values with the reference
(`solutions_lib.comms`) and runs the student's functions under `expect_own` / `no_delegation`
itself (those look inside the kernel); `checks_cases.expect_each_close` compares case by case.
"""
from __future__ import annotations

import numpy as np

from .checks_cases import expect_each_close, expect_each_equal  # noqa: F401  (the cells call them as ck.*)
from .grading import expect_close

#: The collectives `bus_bandwidth` knows (a hidden case draws one of them).
OPS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")


def steps_cases(seed, n: int = 60) -> list[tuple[int, int, bool]]:
    """(dataset size, global batch, drop_last)."""
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(1, 10 ** 7)), int(rng.integers(1, 70000)), bool(rng.random() < 0.5)) for _ in range(n)]


def ring_cases(seed, n: int = 60) -> list[tuple[int, float, float, float]]:
    """(ranks, bytes, latency in s, bandwidth in B/s) of a ring all-reduce."""
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(1, 2000)), float(10 ** rng.uniform(3, 10)), float(10 ** rng.uniform(-7, -4)),
             float(10 ** rng.uniform(9, 12))) for _ in range(n)]


def amdahl_cases(seed, n: int = 40, n_profiles: int = 30) -> tuple[list, list]:
    """(p, workers) pairs for amdahl_speedup, and (profile in ms, scalable parts, workers) for
    amdahl_from_profile, drawn from one generator in that order."""
    rng = np.random.default_rng(seed)
    cases = [(float(rng.uniform(0, 1)), int(rng.integers(1, 100000))) for _ in range(n)]
    profiles = []
    for _ in range(n_profiles):
        prof = {f"part{i}": float(rng.uniform(1, 200)) for i in range(int(rng.integers(1, 6)))}
        scalable = [k for k in prof if rng.random() < 0.6]
        profiles.append((prof, scalable, int(rng.integers(1, 5000))))
    return cases, profiles


def speedup_cases(seed, n: int = 40) -> list[tuple[float, float, float]]:
    """(speedup before, step time before, step time after)."""
    rng = np.random.default_rng(seed)
    return [(float(rng.uniform(0.5, 64)), float(rng.uniform(10, 1000)), float(rng.uniform(10, 1000))) for _ in range(n)]


def fit_datasets(seed, sizes, n: int = 25) -> list[tuple[np.ndarray, np.ndarray]]:
    """Synthetic (sizes, times) with t = (alpha + S / bw) * lognormal noise, a subset of `sizes` each,
    then one data set whose free least-squares optimum has alpha < 0 (the fit must clamp it to 0)."""
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes, dtype=float)
    datasets = []
    for _ in range(n):
        alpha, bw = float(10 ** rng.uniform(-5.5, -3)), float(10 ** rng.uniform(8.5, 11))
        s = np.sort(rng.choice(sizes, size=int(rng.integers(5, 18)), replace=False))
        datasets.append((s, (alpha + s / bw) * np.exp(rng.normal(0, float(rng.uniform(0, 0.1)), s.size))))
    datasets.append((sizes, sizes / 1e9 * np.linspace(0.7, 1.0, sizes.size)))
    return datasets


def expect_fits(got, expected) -> None:
    """Each data set's (alpha, bandwidth) against the expected fit: alpha then bandwidth."""
    for i, (g, e) in enumerate(zip(got, expected)):
        expect_close(g[0], e[0], f"alpha of synthetic data set {i}", rtol=1e-6, atol=1e-12, unit="s",
                     hint="Relative residuals; if alpha comes out negative, refit with alpha = 0.")
        expect_close(g[1], e[1], f"bandwidth of synthetic data set {i}", rtol=1e-6, unit="B/s")


def bus_cases(seed, n: int = 60) -> list[tuple[str, float, float, int]]:
    """(op, bytes, seconds, ranks) with op one of OPS."""
    rng = np.random.default_rng(seed)
    return [(str(rng.choice(list(OPS))), float(10 ** rng.uniform(3, 10)), float(10 ** rng.uniform(-5, 0)),
             int(rng.integers(1, 2049))) for _ in range(n)]
