"""Checks of 06 compute and scaling (theory and exercises), kept here so that each test cell reads
as a few lines of intent.

The case generators draw a hidden test's inputs from the seed the test cell passes (the cell keeps
its own `term_seed(...)` literal); the cell computes the expected values with the reference and
runs the student's functions under `expect_own` / `no_delegation` itself (those look inside the
kernel). `expect_each_close` (checks_cases) then compares case by case, so a failure names the inputs. Nothing
here knows an answer beyond the closed forms the notebooks state.
"""
from __future__ import annotations

import numpy as np

from .checks_cases import expect_each_close  # noqa: F401  (the cells call ck.expect_each_close)
from .grading import expect_close


def _rng(seed) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- 06 theory: compute and MFU
def flops_cases(seed, n: int = 20) -> list[tuple[float, float]]:
    """(n_params, tokens): 1e6..1e12 parameters, 1e8..1e13 tokens, log-uniform."""
    rng = _rng(seed)
    return [(float(10 ** rng.uniform(6, 12)), float(10 ** rng.uniform(8, 13))) for _ in range(n)]


def mfu_cases(seed, n: int = 20) -> list[tuple[float, float]]:
    """(achieved FLOP/s, peak FLOP/s): 1e12..1e17 achieved against 1e17..1e18 peak."""
    rng = _rng(seed)
    return [(float(10 ** rng.uniform(12, 17)), float(10 ** rng.uniform(17, 18))) for _ in range(n)]


def run_mfu_cases(seed, n: int = 20) -> list[tuple]:
    """(n_params, tokens, seconds, devices, peak per device) of a training run."""
    rng = _rng(seed)
    return [(float(10 ** rng.uniform(8, 12)), float(10 ** rng.uniform(10, 13)), float(10 ** rng.uniform(5, 7)),
             int(rng.integers(1, 4097)), float(rng.choice([125e12, 312e12, 989e12]))) for _ in range(n)]


def attention_share_cases(seed, n: int = 20) -> list[tuple]:
    """(n_params, n_layers, d_model, seq_len) with N within 0.8..1.3 of 12 L d^2."""
    rng = _rng(seed)
    cases = []
    for _ in range(n):
        L, d, T = int(rng.integers(2, 97)), int(rng.choice([512, 768, 1024, 2048, 4096, 8192])), int(2 ** rng.integers(8, 18))
        cases.append((float(12 * L * d * d * rng.uniform(0.8, 1.3)), L, d, T))
    return cases


def attention_share(palm_flops_per_token, n_params, n_layers, d_model, seq_len) -> float:
    """The attention part of PaLM's FLOPs per token, from a `palm_flops_per_token(N, L, heads, d, T)`
    the test cell passes (one head of width d: the attention term is 12 L d T either way)."""
    total = palm_flops_per_token(n_params, n_layers, 1, d_model, seq_len)
    return (total - 6 * n_params) / total


# ---------------------------------------------------------------- 06 theory: scaling laws
def kaplan_cases(seed, n: int = 15) -> tuple[list[float], list[tuple[float, float]]]:
    """Compute budgets (1e17..1e27 FLOPs) and (loss ratio, alpha) pairs for compute_multiplier."""
    rng = _rng(seed)
    cs = [float(10 ** rng.uniform(17, 27)) for _ in range(n)]
    ratios = [(float(rng.uniform(0.5, 1.2)), float(rng.uniform(0.03, 0.4))) for _ in range(n)]
    return cs, ratios


def floor_cases(seed, n: int = 20) -> list[tuple[float, float, float, float]]:
    """(loss now, target loss, irreducible loss, alpha), the target above the floor."""
    rng = _rng(seed)
    cases = []
    for _ in range(n):
        l_inf = float(rng.uniform(0, 2))
        now = l_inf + float(rng.uniform(0.1, 3))
        cases.append((now, l_inf + (now - l_inf) * float(rng.uniform(0.3, 1.2)), l_inf, float(rng.uniform(0.03, 0.5))))
    return cases


def budget_cases(seed, n: int = 6) -> list[float]:
    """Compute budgets, 1e19..1e26 FLOPs."""
    rng = _rng(seed)
    return [float(10 ** rng.uniform(19, 26)) for _ in range(n)]


def best_on_grid(compute: float, grid, fit) -> tuple[float, float]:
    """The grid's N with the lowest `fit` loss (E + A N^-alpha + B D^-beta) at D = C / (6N), and that D."""
    grid = np.asarray(grid, dtype=float)
    i = int(np.argmin(fit.E + fit.A * grid ** -fit.alpha + fit.B * (compute / (6 * grid)) ** -fit.beta))
    return grid[i], compute / (6 * grid[i])


def reachable_cases(seed, fit, n: int = 20) -> list[tuple[float, float]]:
    """(n_params, target loss) with the target 0.02..1.0 above the model's floor E + A N^-alpha under `fit`."""
    rng = _rng(seed)
    cases = []
    for _ in range(n):
        n_params = float(10 ** rng.uniform(8, 12))
        cases.append((n_params, float(fit.E + fit.A * n_params ** -fit.alpha + rng.uniform(0.02, 1.0))))
    return cases


def expect_grid_optimum(budgets, got, expected) -> None:
    """For each budget C: the student's (N, D) against the grid's optimum, N then D."""
    for c, g, e in zip(budgets, got, expected):
        expect_close(g[0], e[0], f"best N on the grid for C = {c:.3e}", rtol=1e-9)
        expect_close(g[1], e[1], f"best D on the grid for C = {c:.3e}", rtol=1e-9)
