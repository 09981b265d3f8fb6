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

from .checks_cases import expect_each_close, expect_each_equal  # noqa: F401  (the cells call them as ck.*)
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


# ---------------------------------------------------------------- 06 exercises
def intensity_cases(seed, n: int = 30) -> list[tuple[int, int, int, float]]:
    """(m, n, k, bytes per element) of a GEMM, each dimension 1..8192."""
    rng = _rng(seed)
    return [(int(rng.integers(1, 8193)), int(rng.integers(1, 8193)), int(rng.integers(1, 8193)), float(rng.choice([1, 2, 4])))
            for _ in range(n)]


def ridge_cases(seed, n: int = 30) -> list[tuple[float, float, int]]:
    """(peak FLOP/s, bandwidth B/s, bytes per element)."""
    rng = _rng(seed)
    return [(float(10 ** rng.uniform(11, 15.5)), float(10 ** rng.uniform(10.5, 12.8)), int(rng.choice([1, 2, 4]))) for _ in range(n)]


def cost_cases(seed, n: int = 20) -> tuple[list[tuple[float, float]], float]:
    """(parameters, tokens per parameter) pairs, then one size P at which to take the log-log slope of C(P)."""
    rng = _rng(seed)
    cases = [(float(10 ** rng.uniform(6, 12)), float(rng.uniform(1, 300))) for _ in range(n)]
    return cases, float(10 ** rng.uniform(8, 11))


def roofline_cases(seed, n: int = 10) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(intensities, FLOP/s under a roofline times 0.2..1, memory_bound_below), kept when at least one
    point lies below the threshold."""
    rng = _rng(seed)
    cases = []
    for _ in range(n):
        p, w = float(10 ** rng.uniform(10, 14)), float(10 ** rng.uniform(9.5, 12.5))
        i = 10 ** rng.uniform(-1.5, 3, int(rng.integers(5, 40)))
        f = np.minimum(p, i * w) * rng.uniform(0.2, 1.0, i.size)
        cases.append((i, f, float(rng.uniform(1.0, 8.0))))
    return [c for c in cases if np.any(c[0] < c[2])]


def expect_roofline_fits(cases, got, expected) -> None:
    """Each fit's (peak, bandwidth) against the expected fit: peak then bandwidth."""
    for k, (g, e) in enumerate(zip(got, expected)):
        expect_close(g[0], e[0], f"peak of hidden case {k}", rtol=1e-12, unit="FLOP/s")
        expect_close(g[1], e[1], f"bandwidth of hidden case {k} (threshold {cases[k][2]:.2f})", rtol=1e-12, unit="bytes/s")


def optimal_cases(seed, n: int = 4) -> list[tuple[float, str]]:
    """(compute budget 1e18..1e27, fit) for the Hoffmann fit, then the Epoch fit."""
    rng = _rng(seed)
    return [(float(10 ** rng.uniform(18, 27)), fit) for fit in ("hoffmann", "epoch") for _ in range(n)]


def law_rss(fit: dict, runs: dict) -> float:
    """Sum of squared residuals of the law E + A N^-alpha + B D^-beta (a dict of the five constants) on `runs`."""
    pred = fit["E"] + fit["A"] * runs["n_params"] ** -fit["alpha"] + fit["B"] * runs["n_tokens"] ** -fit["beta"]
    return float(np.sum((pred - runs["loss"]) ** 2))


def palm_cases(seed, n: int = 20) -> list[tuple[float, int, int, int, int]]:
    """(parameters, layers, heads, head dim, sequence length) for the FLOPs per token of a transformer."""
    rng = _rng(seed)
    return [(float(10 ** rng.uniform(6, 12)), int(rng.integers(1, 97)), int(rng.integers(1, 65)), int(rng.choice([32, 64, 128])),
             int(2 ** rng.integers(6, 16))) for _ in range(n)]


def inference_cases(seed, n: int = 3) -> list[tuple[float, float, str]]:
    """(target loss 2.0..2.6, inference tokens 1e10..1e14, fit) for each fit, then (2.3, 0, "epoch")."""
    rng = _rng(seed)
    cases = [(float(rng.uniform(2.0, 2.6)), float(10 ** rng.uniform(10, 14)), fit) for fit in ("hoffmann", "epoch") for _ in range(n)]
    return cases + [(2.3, 0.0, "epoch")]


def expect_optimal_on_grid(cases, got, brute) -> None:
    """Per (budget, fit): N_opt against the brute-force grid optimum (0.1%), and 6 N D = C."""
    for (c, fit), (n, d), nb in zip(cases, got, brute):
        expect_close(n, nb, f"N_opt for C = {c:.3e} ({fit} fit) against a brute-force search", rtol=1e-3)
        expect_close(6 * n * d, c, f"6 N D for C = {c:.3e} ({fit} fit)", rtol=1e-9)


def expect_inference_optima(cases, got, expected, tokens_for_loss) -> None:
    """Per (target, inference tokens, fit): N against the expected optimum (1%), and the training tokens
    of the student's own N against `tokens_for_loss(N, target, fit)` (the test cell passes the reference)."""
    for c, (n, d), e in zip(cases, got, expected):
        expect_close(n, e["n_params"], f"best N for target {c[0]:.3f}, {c[1]:.3g} inference tokens, {c[2]} fit", rtol=1e-2)
        expect_close(d, tokens_for_loss(n, c[0], c[2]), f"training tokens of your N for target {c[0]:.3f} ({c[2]} fit)",
                     rtol=1e-6, measured=True)
