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
           "tokens_for_loss", "inference_aware_optimal", "compute_multiplier_with_floor", "fit_chinchilla_law",
           "bootstrap_chinchilla_fit", "synthetic_scaling_runs", "law_optimum_numeric", "isoflop_runs",
           "isoflop_fit", "outlier_scaling_runs", "loss_law_objective", "fit_loss_law"]


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


# ---------------------------------------------------------------- fitting a law yourself (EXT-FIT)


def compute_multiplier_with_floor(loss_now: float, loss_target: float, l_inf: float, alpha: float) -> float:
    """Compute factor C'/C to go from `loss_now` to `loss_target` when L(C) = L_inf + a C^-alpha.

    Only the reducible part L - L_inf follows the power law, so
    ``C'/C = ((loss_target - L_inf) / (loss_now - L_inf)) ** (-1 / alpha)``; a target at or below
    the irreducible loss L_inf is unreachable (``ValueError``).
    """
    for name, v in (("loss_now", loss_now), ("loss_target", loss_target), ("alpha", alpha)):
        positive(name, v)
    non_negative("l_inf", l_inf)
    if loss_now <= l_inf:
        raise ValueError(f"loss_now {loss_now} must lie above the irreducible loss {l_inf}")
    if loss_target <= l_inf:
        raise ValueError(f"loss_target {loss_target} is at or below the irreducible loss {l_inf}: no compute reaches it")
    return ((loss_target - l_inf) / (loss_now - l_inf)) ** (-1.0 / alpha)


def _linear_given_exponents(n, d, loss, alphas, betas):
    """For every (alpha, beta) pair: least-squares (E, A, B) and the residual sum of squares."""
    X = np.stack([np.ones((alphas.size, n.size)), n[None, :] ** -alphas[:, None], d[None, :] ** -betas[:, None]], axis=2)
    xtx = np.einsum("gni,gnj->gij", X, X)
    xty = np.einsum("gni,n->gi", X, loss)
    coef = np.linalg.solve(xtx, xty[..., None])[..., 0]
    rss = np.sum((np.einsum("gni,gi->gn", X, coef) - loss[None, :]) ** 2, axis=1)
    return coef, rss


def fit_chinchilla_law(n_params, n_tokens, loss, *, exponent_range=(0.05, 1.0)) -> dict:
    """Least-squares fit of L(N, D) = E + A N^-alpha + B D^-beta to (N, D, loss) runs.

    Variable projection: for fixed exponents the model is linear in (E, A, B), solved exactly;
    the exponents come from a grid of step 0.01 over `exponent_range`, then two refinements
    (steps 0.001 and 0.0001) around the best point. Returns a dict with E, A, B, alpha, beta and
    rss (the sum of squared residuals in loss units). Needs at least 6 runs with at least two
    distinct N and two distinct D.
    """
    n = _positive_array("n_params", n_params)
    d = _positive_array("n_tokens", n_tokens)
    y = _positive_array("loss", loss)
    if not (n.shape == d.shape == y.shape) or n.ndim != 1:
        raise ValueError(f"n_params, n_tokens and loss must be 1-D arrays of one length, got {n.shape}, {d.shape}, {y.shape}")
    if n.size < 6 or np.unique(n).size < 2 or np.unique(d).size < 2:
        raise ValueError("need at least 6 runs with at least two distinct N and two distinct D")
    # scale N and D to O(1) so the normal equations are well conditioned; A and B are scaled back
    n0, d0 = float(np.exp(np.mean(np.log(n)))), float(np.exp(np.mean(np.log(d))))
    ns, ds = n / n0, d / d0
    lo_e, hi_e = exponent_range
    step = 0.01
    a_grid = np.arange(lo_e, hi_e + step / 2, step)
    b_grid = a_grid
    best = None
    for _ in range(3):
        aa, bb = np.meshgrid(a_grid, b_grid, indexing="ij")
        aa, bb = aa.ravel(), bb.ravel()
        coef, rss = _linear_given_exponents(ns, ds, y, aa, bb)
        i = int(np.argmin(rss))
        best = (aa[i], bb[i], coef[i], rss[i])
        step /= 10
        a_grid = np.clip(np.arange(aa[i] - 10 * step, aa[i] + 10.5 * step, step), lo_e, hi_e)
        b_grid = np.clip(np.arange(bb[i] - 10 * step, bb[i] + 10.5 * step, step), lo_e, hi_e)
    alpha, beta, (E, As, Bs), rss = best
    return {"E": float(E), "A": float(As * n0 ** alpha), "B": float(Bs * d0 ** beta), "alpha": float(alpha),
            "beta": float(beta), "rss": float(rss)}


def bootstrap_chinchilla_fit(n_params, n_tokens, loss, n_boot: int = 100, seed: int = 0) -> dict:
    """The fit's uncertainty by resampling the runs with replacement.

    Resample i uses the run indices ``np.random.default_rng(seed).integers(0, n, (n_boot, n))[i]``
    and refits with `fit_chinchilla_law`. Returns arrays "alpha", "beta", "E" and "a" (the N_opt
    exponent beta / (alpha + beta)) over the resamples, and the summaries "alpha_std",
    "beta_std" (population standard deviations) and "a_interval" (5th and 95th percentiles of a).
    """
    n = np.asarray(n_params, dtype=float)
    d = np.asarray(n_tokens, dtype=float)
    y = np.asarray(loss, dtype=float)
    positive("n_boot", n_boot, integer=True)
    idx = np.random.default_rng(seed).integers(0, n.size, (n_boot, n.size))
    out = {"alpha": [], "beta": [], "E": []}
    for rows in idx:
        f = fit_chinchilla_law(n[rows], d[rows], y[rows])
        for k in out:
            out[k].append(f[k])
    res = {k: np.asarray(v) for k, v in out.items()}
    res["a"] = res["beta"] / (res["alpha"] + res["beta"])
    res["alpha_std"], res["beta_std"] = float(np.std(res["alpha"])), float(np.std(res["beta"]))
    res["a_interval"] = tuple(float(x) for x in np.percentile(res["a"], [5, 95]))
    return res


def synthetic_scaling_runs(fit: str = "epoch", noise: float = 0.01, seed: int = 0,
                           sizes=(2e7, 5e7, 1.2e8, 3e8, 7e8), tokens_per_param=(5, 10, 20, 40, 80)) -> dict:
    """A small grid of (N, D, loss) 'training runs' from a known law (published constants of `fit`)
    with multiplicative noise: loss = L(N, D) * (1 + noise * standard normal). Data for the
    exercise that fits a scaling law; returns arrays n_params, n_tokens, loss and the true law."""
    f = _fit(fit)
    non_negative("noise", noise)
    rng = np.random.default_rng(seed)
    n = np.repeat(np.asarray(sizes, dtype=float), len(tokens_per_param))
    d = n * np.tile(np.asarray(tokens_per_param, dtype=float), len(sizes))
    clean = f.E + f.A * n ** -f.alpha + f.B * d ** -f.beta
    return {"n_params": n, "n_tokens": d, "loss": clean * (1 + noise * rng.standard_normal(n.size)), "true": f}


# ---------------------------------------------------------------- approaches 2 and 3 of Hoffmann et al. 2022


def law_optimum_numeric(compute_flops: float, fit: str = "hoffmann") -> float:
    """The loss-minimising N along the IsoFLOP curve 6 N D = C of a published law, found by a
    golden-section search in log N (no closed form: the data generators' ground truth)."""
    f = _fit(fit)
    positive("compute_flops", compute_flops)

    def loss(lg):
        n = 10.0 ** lg
        return f.E + f.A * n ** -f.alpha + f.B * (compute_flops / (6.0 * n)) ** -f.beta

    lo, hi, g = 0.0, 20.0, (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(120):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if loss(a) < loss(b):
            hi = b
        else:
            lo = a
    return 10.0 ** ((lo + hi) / 2.0)


def isoflop_runs(fit: str = "hoffmann", budgets=(6e18, 3e19, 1e20, 3e20, 1e21), points: int = 9,
                 spacing: float = 0.25, noise: float = 0.002, seed: int = 0, offsets=None,
                 shuffle: bool = False) -> dict:
    """Synthetic IsoFLOP profiles (Hoffmann et al. 2022, approach 2): for every compute budget C,
    `points` model sizes spaced `spacing` decades apart, each trained on D = C / (6 N) tokens, with
    final loss L(N, D) * (1 + noise * standard normal) from the published law `fit`.

    The sizes of budget i are centred `offsets[i]` decades from the law's true optimum (drawn
    uniformly in +-spacing/2 when None), so the best sampled run is in general not the optimum.
    Returns arrays compute, n_params, n_tokens, loss (one entry per run, budget by budget, or in a
    seeded random order when `shuffle`), the budgets, the true optimum per budget "n_opt_true"
    (numerical), the true exponents "a_true" = beta / (alpha + beta) and "b_true", and the law."""
    f = _fit(fit)
    non_negative("noise", noise)
    positive("points", points, integer=True)
    positive("spacing", spacing)
    b = _positive_array("budgets", budgets)
    rng = np.random.default_rng(seed)
    off = rng.uniform(-spacing / 2, spacing / 2, b.size) if offsets is None else np.asarray(offsets, dtype=float)
    if off.shape != b.shape:
        raise ValueError(f"offsets must have one entry per budget, got {off.shape} for {b.shape}")
    n_true = np.array([law_optimum_numeric(c, fit) for c in b])
    steps = spacing * (np.arange(points) - (points - 1) / 2.0)
    n = (10.0 ** (np.log10(n_true)[:, None] + off[:, None] + steps[None, :])).ravel()
    c = np.repeat(b, points)
    d = c / (6.0 * n)
    loss = (f.E + f.A * n ** -f.alpha + f.B * d ** -f.beta) * (1 + noise * rng.standard_normal(n.size))
    if shuffle:
        p = rng.permutation(n.size)
        c, n, d, loss = c[p], n[p], d[p], loss[p]
    a_true = f.beta / (f.alpha + f.beta)
    return {"compute": c, "n_params": n, "n_tokens": d, "loss": loss, "budgets": b, "n_opt_true": n_true,
            "a_true": a_true, "b_true": 1.0 - a_true, "true": f}


def isoflop_fit(compute, n_params, loss) -> dict:
    """Approach 2 of Hoffmann et al. 2022: the loss-minimising N of every IsoFLOP profile (a
    parabola in ln N through each budget's runs, its vertex), then N_opt = k C^a and
    D_opt = C / (6 N_opt) = k' C^b by least squares in log-log.

    Runs belong to one budget when their compute values are equal; any order. Returns "compute"
    (the budgets, ascending), "n_opt", "d_opt" (arrays in that order), "a" and "b" (a + b = 1)."""
    c = _positive_array("compute", compute)
    n = _positive_array("n_params", n_params)
    y = _positive_array("loss", loss)
    if not (c.shape == n.shape == y.shape) or c.ndim != 1:
        raise ValueError(f"compute, n_params and loss must be 1-D arrays of one length, got {c.shape}, {n.shape}, {y.shape}")
    budgets = np.unique(c)
    if budgets.size < 2:
        raise ValueError("need runs at two or more compute budgets to fit an exponent")
    n_opt = []
    for b in budgets:
        m = c == b
        x = np.log(n[m])
        if np.unique(x).size < 3:
            raise ValueError(f"budget {b:.3g} has fewer than 3 distinct model sizes: no minimum can be located")
        p2, p1, _ = np.polyfit(x - x.mean(), y[m], 2)
        if not p2 > 0:
            raise ValueError(f"the profile at budget {b:.3g} has no minimum (it is not convex)")
        n_opt.append(math.exp(x.mean() - p1 / (2 * p2)))
    n_opt = np.asarray(n_opt)
    d_opt = budgets / (6.0 * n_opt)
    a = float(np.polyfit(np.log(budgets), np.log(n_opt), 1)[0])
    b = float(np.polyfit(np.log(budgets), np.log(d_opt), 1)[0])
    return {"compute": budgets, "n_opt": n_opt, "d_opt": d_opt, "a": a, "b": b}


def outlier_scaling_runs(fit: str = "epoch", noise: float = 0.002, seed: int = 0, n_outliers: int = 3,
                         sizes=tuple(np.logspace(7, 10, 7)), tokens_per_param=(2, 5, 10, 20, 50, 100, 200),
                         outlier_excess=(0.3, 0.5)) -> dict:
    """Training runs on a grid of sizes x tokens per parameter from a known law with
    multiplicative noise (as `synthetic_scaling_runs`), where `n_outliers` runs of the largest
    model (seeded choice) diverged: their loss is multiplied by 1 + u, u uniform in
    `outlier_excess`. Returns n_params, n_tokens, loss, the boolean mask "outlier" and the law."""
    f = _fit(fit)
    non_negative("noise", noise)
    non_negative("n_outliers", n_outliers, integer=True)
    rng = np.random.default_rng(seed)
    n = np.repeat(np.asarray(sizes, dtype=float), len(tokens_per_param))
    d = n * np.tile(np.asarray(tokens_per_param, dtype=float), len(sizes))
    loss = (f.E + f.A * n ** -f.alpha + f.B * d ** -f.beta) * (1 + noise * rng.standard_normal(n.size))
    largest = np.flatnonzero(n == n.max())
    if n_outliers > largest.size:
        raise ValueError(f"at most {largest.size} outliers (the runs of the largest model), got {n_outliers}")
    idx = rng.choice(largest, int(n_outliers), replace=False)
    lo, hi = outlier_excess
    loss[idx] *= 1.0 + rng.uniform(lo, hi, idx.size)
    mask = np.zeros(n.size, dtype=bool)
    mask[idx] = True
    return {"n_params": n, "n_tokens": d, "loss": loss, "outlier": mask, "true": f}


def loss_law_objective(params: dict, n_params, n_tokens, loss, robust: bool = True, delta: float = 1e-3) -> float:
    """The objective of approach 3 at the constants `params` (E, A, B, alpha, beta): the sum over
    runs of rho(ln L_model - ln L), rho the Huber loss with threshold `delta` (r^2/2 when
    |r| <= delta, delta (|r| - delta/2) beyond) when `robust`, else r^2. A measuring tool for the
    tests (what an answer's constants achieve), not a fit."""
    n, d, y = (np.asarray(x, dtype=float) for x in (n_params, n_tokens, loss))
    try:
        E, A, B, al, be = (float(params[k]) for k in ("E", "A", "B", "alpha", "beta"))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"params must map E, A, B, alpha, beta to numbers ({e})") from None
    with np.errstate(all="ignore"):
        r = np.log(E + A * n ** -al + B * d ** -be) - np.log(y)
    if not np.all(np.isfinite(r)):
        return float("inf")
    if not robust:
        return float(np.sum(r * r))
    a = np.abs(r)
    return float(np.sum(np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))))


def _huber_weights(r, delta, robust):
    """IRLS weights rho'(r) / r of the Huber loss (all 1 for least squares)."""
    if not robust:
        return np.ones_like(r)
    a = np.abs(r)
    return np.where(a <= delta, 1.0, delta / np.maximum(a, 1e-300))


def _log_law(theta, ln, ld):
    """ln L and its Jacobian in (e, a, b, alpha, beta) for ln L = logsumexp(a - alpha ln N, b - beta ln D, e)."""
    e, a, b, al, be = theta
    z = np.stack([a - al * ln, b - be * ld, np.full_like(ln, e)])
    m = z.max(axis=0)
    s = np.exp(z - m)
    tot = s.sum(axis=0)
    sm = s / tot
    return m + np.log(tot), np.stack([sm[2], sm[0], sm[1], -sm[0] * ln, -sm[1] * ld], axis=1)


def fit_loss_law(n_params, n_tokens, loss, robust: bool = True, delta: float = 1e-3) -> dict:
    """Approach 3 of Hoffmann et al. 2022: L(N, D) = E + A N^-alpha + B D^-beta fitted by minimising
    `loss_law_objective` (Huber on log-loss residuals with threshold delta, or least squares on
    them when not `robust`).

    Parametrised as ln L = logsumexp(a - alpha ln N, b - beta ln D, e) with E, A, B = exp(e, a, b);
    started from the 10 best points of a 0.05 grid of exponents (E, A, B by weighted linear least
    squares for each pair), each refined by iteratively reweighted least squares (Huber weights
    min(1, delta/|r|)) with damped Gauss-Newton steps that never raise the objective. Returns E,
    A, B, alpha, beta and "objective"."""
    n = _positive_array("n_params", n_params)
    d = _positive_array("n_tokens", n_tokens)
    y = _positive_array("loss", loss)
    if not (n.shape == d.shape == y.shape) or n.ndim != 1:
        raise ValueError(f"n_params, n_tokens and loss must be 1-D arrays of one length, got {n.shape}, {d.shape}, {y.shape}")
    if n.size < 6:
        raise ValueError(f"need at least 6 runs, got {n.size}")
    positive("delta", delta)
    n0, d0 = float(np.exp(np.mean(np.log(n)))), float(np.exp(np.mean(np.log(d))))
    ns, ds = n / n0, d / d0
    grid = np.arange(0.05, 1.0 + 1e-9, 0.05)
    aa, bb = (g.ravel() for g in np.meshgrid(grid, grid, indexing="ij"))
    X = np.stack([np.ones((aa.size, n.size)), ns[None, :] ** -aa[:, None], ds[None, :] ** -bb[:, None]], axis=2)
    w = 1.0 / y ** 2                      # relative residuals ~ log residuals
    coef = np.linalg.solve(np.einsum("gni,n,gnj->gij", X, w, X), np.einsum("gni,n,n->gi", X, w, y)[..., None])[..., 0]
    coef = np.maximum(coef, 1e-6)
    starts = np.stack([np.log(coef[:, 0]), np.log(coef[:, 1]) + aa * math.log(n0),
                       np.log(coef[:, 2]) + bb * math.log(d0), aa, bb], axis=1)
    r0 = np.log(np.einsum("gni,gi->gn", X, coef)) - np.log(y)[None, :]
    per = (r0 * r0).sum(1) if not robust else np.where(np.abs(r0) <= delta, 0.5 * r0 * r0,
                                                       delta * (np.abs(r0) - 0.5 * delta)).sum(1)
    ln, ld, ly = np.log(n), np.log(d), np.log(y)

    def objective(r):
        if not robust:
            return float(np.sum(r * r))
        a = np.abs(r)
        return float(np.sum(np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))))

    best = None
    for theta in starts[np.argsort(per)[:10]]:
        pred, J = _log_law(theta, ln, ld)
        r = pred - ly
        f, lam = objective(r), 1e-3
        for _ in range(300):
            wt = _huber_weights(r, delta, robust)
            H = J.T @ (wt[:, None] * J)
            step = np.linalg.solve(H + lam * np.diag(np.diag(H) + 1e-12), -(J.T @ (wt * r)))
            pred2, J2 = _log_law(theta + step, ln, ld)
            f2 = objective(pred2 - ly)
            if f2 <= f:
                done = f - f2 <= 1e-15 * max(f, 1e-300)
                theta, r, J, f, lam = theta + step, pred2 - ly, J2, f2, max(lam / 3.0, 1e-9)
                if done and lam <= 1e-6:
                    break
            else:
                lam *= 10.0
                if lam > 1e8:
                    break
        if best is None or f < best[0]:
            best = (f, theta)
    e, a, b, al, be = (float(v) for v in best[1])
    out = {"E": math.exp(e), "A": math.exp(a), "B": math.exp(b), "alpha": al, "beta": be}
    out["objective"] = loss_law_objective(out, n, d, y, robust, delta)
    return out
