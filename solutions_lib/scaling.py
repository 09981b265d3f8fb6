"""Scaling laws: Kaplan et al. 2020, Chinchilla (Hoffmann et al. 2022) and its Epoch AI refit,
the compute-optimal allocation in closed form, and inference-aware model sizing.

Units: parameters and tokens are counts; compute is in FLOPs with C = 6 N D; losses are in
nats per token (the fits' own units).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._checks import choice, non_negative, positive

__all__ = ["ChinchillaFit", "FITS", "chinchilla_loss", "chinchilla_optimal", "tokens_per_param",
           "kaplan_loss_params", "kaplan_loss_data", "kaplan_loss_compute",
           "tokens_for_loss", "inference_aware_optimal"]


@dataclass(frozen=True)
class ChinchillaFit:
    """L(N, D) = E + A / N^alpha + B / D^beta."""
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    source: str


FITS = {
    # Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models", eq. (10), approach 3.
    "hoffmann": ChinchillaFit(1.69, 406.4, 410.7, 0.34, 0.28, "Hoffmann et al. 2022, eq. 10"),
    # Besiroglu, Erdil, Barnett, You 2024, "Chinchilla Scaling: A replication attempt" (Epoch AI),
    # their re-estimate of approach 3 from the paper's own data.
    "epoch": ChinchillaFit(1.8172, 482.01, 2085.43, 0.3478, 0.3658, "Besiroglu et al. 2024 (Epoch AI)"),
}

# Kaplan et al. 2020, "Scaling Laws for Neural Language Models", table 5 (non-embedding N).
KAPLAN_N_C, KAPLAN_ALPHA_N = 8.8e13, 0.076
KAPLAN_D_C, KAPLAN_ALPHA_D = 5.4e13, 0.095
KAPLAN_C_C_PF_DAYS, KAPLAN_ALPHA_C = 3.1e8, 0.050
PF_DAY = 1e15 * 86400.0  # FLOPs in one petaflop/s-day


def _fit(fit: str) -> ChinchillaFit:
    choice("fit", fit, FITS)
    return FITS[fit]


def _positive_array(name, x):
    a = np.asarray(x, dtype=float)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {x!r}")
    return a


def _out(a):
    return float(a) if np.ndim(a) == 0 else a


def chinchilla_loss(n_params, n_tokens, fit: str = "hoffmann"):
    """L(N, D) = E + A N^-alpha + B D^-beta (nats/token); N and D may be numpy arrays (broadcast)."""
    f = _fit(fit)
    n = _positive_array("n_params", n_params)
    d = _positive_array("n_tokens", n_tokens)
    return _out(f.E + f.A * n ** -f.alpha + f.B * d ** -f.beta)


def chinchilla_optimal(compute_flops: float, fit: str = "hoffmann") -> tuple[float, float]:
    """(N_opt, D_opt) minimising L(N, D) subject to 6 N D = C.

    Setting dL/dN = 0 along D = C/(6N) gives alpha A N^-alpha = beta B D^-beta, hence
    N_opt = G (C/6)^(beta/(alpha+beta)), D_opt = G^-1 (C/6)^(alpha/(alpha+beta)),
    G = (alpha A / (beta B))^(1/(alpha+beta))  (Hoffmann et al. 2022, appendix D.2).
    """
    f = _fit(fit)
    positive("compute_flops", compute_flops)
    s = f.alpha + f.beta
    g = (f.alpha * f.A / (f.beta * f.B)) ** (1.0 / s)
    n = g * (compute_flops / 6.0) ** (f.beta / s)
    return n, compute_flops / (6.0 * n)


def tokens_per_param(compute_flops: float, fit: str = "hoffmann") -> float:
    """D_opt / N_opt at a compute budget (about 20 at Chinchilla's scale for the Epoch refit)."""
    n, d = chinchilla_optimal(compute_flops, fit)
    return d / n


def kaplan_loss_params(n_params):
    """L(N) = (N_c / N)^0.076 with N_c = 8.8e13 non-embedding parameters (data unlimited)."""
    return _out((KAPLAN_N_C / _positive_array("n_params", n_params)) ** KAPLAN_ALPHA_N)


def kaplan_loss_data(n_tokens):
    """L(D) = (D_c / D)^0.095 with D_c = 5.4e13 tokens (model large enough, early stopping)."""
    return _out((KAPLAN_D_C / _positive_array("n_tokens", n_tokens)) ** KAPLAN_ALPHA_D)


def kaplan_loss_compute(compute_flops):
    """L(C_min) = (C_c / C)^0.050 with C_c = 3.1e8 PF-days, C given in FLOPs."""
    c = _positive_array("compute_flops", compute_flops) / PF_DAY
    return _out((KAPLAN_C_C_PF_DAYS / c) ** KAPLAN_ALPHA_C)


def tokens_for_loss(n_params: float, target_loss: float, fit: str = "hoffmann") -> float:
    """Tokens D that bring a model of N parameters to `target_loss`: solve L(N, D) = target.

    D = (B / (target - E - A N^-alpha))^(1/beta); ValueError when N alone cannot reach the
    target (the parameter term plus E is already at or above it).
    """
    f = _fit(fit)
    positive("n_params", n_params)
    positive("target_loss", target_loss)
    gap = target_loss - f.E - f.A * n_params ** -f.alpha
    if gap <= 0:
        raise ValueError(f"a model of {n_params:.3g} parameters cannot reach loss {target_loss} on any "
                         f"number of tokens (its floor is {target_loss - gap:.4f}); use a bigger model")
    return (f.B / gap) ** (1.0 / f.beta)


def inference_aware_optimal(target_loss: float, inference_tokens: float, fit: str = "hoffmann",
                            n_grid: int = 4001) -> dict:
    """Model size that reaches `target_loss` at the least train + serve compute.

    Total FLOPs(N) = 6 N D(N) + 2 N D_inf, where D(N) = `tokens_for_loss(N, target)` and each
    served token costs a 2 N forward (Sardana et al. 2024, "Beyond Chinchilla-Optimal").
    Minimised over log N on a grid, then refined by golden-section search. Returns a dict with
    n_params, n_tokens, train_flops, inference_flops, total_flops.
    """
    f = _fit(fit)
    positive("target_loss", target_loss)
    non_negative("inference_tokens", inference_tokens)
    if target_loss <= f.E:
        raise ValueError(f"target_loss {target_loss} is below the irreducible loss E = {f.E} of the "
                         f"'{fit}' fit: no model reaches it")
    n_min = (f.A / (target_loss - f.E)) ** (1.0 / f.alpha) * (1 + 1e-9)

    def total(log_n):
        n = math.exp(log_n)
        return 6.0 * n * tokens_for_loss(n, target_loss, fit) + 2.0 * n * inference_tokens

    grid = np.linspace(math.log(n_min) + 1e-6, math.log(n_min) + 12.0, n_grid)
    values = [total(x) for x in grid]
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, n_grid - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(100):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if total(a) < total(b):
            hi = b
        else:
            lo = a
    n = math.exp((lo + hi) / 2)
    d = tokens_for_loss(n, target_loss, fit)
    return {"n_params": n, "n_tokens": d, "train_flops": 6.0 * n * d,
            "inference_flops": 2.0 * n * inference_tokens,
            "total_flops": 6.0 * n * d + 2.0 * n * inference_tokens}
