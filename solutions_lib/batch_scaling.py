"""Batch size and the learning rate: batch accounting, the linear and square-root scaling
rules, and the gradient noise scale (McCandlish et al. 2018) with its two-batch estimator.

Units: batch sizes are counted in examples (sequences) unless a name says tokens; learning
rates are dimensionless step sizes; squared gradient norms are in (loss unit / parameter unit)^2.
`solutions_lib.schedules` re-exports every public name of this module.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

__all__ = [
    "sequences_per_step", "tokens_per_step", "scale_lr", "linear_scaling_table",
    "noise_scale_components", "gradient_noise_scale", "linear_regression_gradient_stats",
    "linear_regression_noise_scale", "optimal_lr_noise_model", "steps_examples_tradeoff",
    "plan_per_gpu_batch", "minibatch_gradient_variance", "population_gradient_trace",
    "loglog_slope",
]


# ---------------------------------------------------------------- validation


def _pos_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        if isinstance(value, Real) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be a whole number, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


def _pos_real(name: str, value, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    value = float(value)
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


# ---------------------------------------------------------------- batch accounting


def sequences_per_step(micro_batch: int, dp: int, grad_accum: int = 1) -> int:
    """Global batch in sequences per optimizer step: ``micro_batch * dp * grad_accum``.

    Each of the `dp` data-parallel ranks runs `grad_accum` micro-batches of `micro_batch`
    sequences before the gradients are averaged and the optimizer steps once.
    """
    return _pos_int("micro_batch", micro_batch) * _pos_int("dp", dp) * _pos_int("grad_accum", grad_accum)


def tokens_per_step(micro_batch: int, seq_len: int, dp: int, grad_accum: int = 1) -> int:
    """Tokens per optimizer step: ``micro_batch * seq_len * dp * grad_accum``.

    Example (TSX-04): micro 4, seq 2048, dp 32, accum 8 -> 2,097,152 tokens (2^21).
    """
    return sequences_per_step(micro_batch, dp, grad_accum) * _pos_int("seq_len", seq_len)


# ---------------------------------------------------------------- scaling rules


def scale_lr(base_lr: float, base_batch: float, new_batch: float, rule: str = "linear") -> float:
    """Learning rate for `new_batch` given one tuned at `base_batch`.

    - ``rule="linear"``: ``base_lr * new_batch / base_batch`` (Goyal et al. 2017, SGD: k small
      steps of size eta are close to one step of size k*eta on a k-times larger batch).
    - ``rule="sqrt"``: ``base_lr * sqrt(new_batch / base_batch)`` (Krizhevsky 2014; keeps the
      variance of the update fixed; the usual rule for Adam-type optimizers, Malladi et al. 2022).

    Both batches in the same unit (sequences or tokens). Raises ValueError for a non-positive
    learning rate or batch and for an unknown rule.
    """
    base_lr = _pos_real("base_lr", base_lr)
    k = _pos_real("new_batch", new_batch) / _pos_real("base_batch", base_batch)
    if rule == "linear":
        return base_lr * k
    if rule == "sqrt":
        return base_lr * math.sqrt(k)
    raise ValueError(f"rule must be 'linear' or 'sqrt', got {rule!r}")


def linear_scaling_table(rows, lr_limit: float = 0.01, rule: str = "linear") -> list[tuple[float, bool]]:
    """For each ``(base_batch, base_lr, new_batch)`` row: ``(scaled_lr, scaled_lr > lr_limit)``.

    CH26-15: rows (256, 1e-3, 4096), (64, 5e-4, 2048), (512, 3e-4, 32768) give 0.016, 0.016
    and 0.0192 under the linear rule: all three exceed 0.01, the last one most.
    """
    lr_limit = _pos_real("lr_limit", lr_limit)
    out = []
    for i, row in enumerate(rows):
        try:
            base_batch, base_lr, new_batch = row
        except (TypeError, ValueError):
            raise ValueError(f"row {i} must be (base_batch, base_lr, new_batch), got {row!r}") from None
        lr = scale_lr(base_lr, base_batch, new_batch, rule)
        out.append((lr, lr > lr_limit))
    return out


# ---------------------------------------------------------------- gradient noise scale


def noise_scale_components(sq_norm_small, sq_norm_big, b_small: float, b_big: float) -> tuple[float, float]:
    """Unbiased estimates of ``(|G|^2, tr(Sigma))`` from two batch sizes (McCandlish et al. 2018, App. A.1).

    For a mean gradient over B independent examples, ``E|G_B|^2 = |G|^2 + tr(Sigma)/B``, a straight
    line in 1/B. Two batch sizes give its intercept and slope::

        |G|^2     ~ (b_big |G_big|^2 - b_small |G_small|^2) / (b_big - b_small)
        tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1/b_small - 1/b_big)

    `sq_norm_small`, `sq_norm_big`: measured squared norms ``|G_B|^2`` (scalars, or arrays of
    paired measurements that are averaged first, as the paper recommends, before any ratio).
    Sigma is the per-example gradient covariance.
    """
    bs, bb = _pos_real("b_small", b_small), _pos_real("b_big", b_big)
    if not bb > bs:
        raise ValueError(f"b_big must be larger than b_small, got b_small={bs}, b_big={bb}")
    s = np.asarray(sq_norm_small, dtype=float)
    b = np.asarray(sq_norm_big, dtype=float)
    if s.size == 0 or b.size == 0 or not (np.all(np.isfinite(s)) and np.all(np.isfinite(b))):
        raise ValueError("squared gradient norms must be finite and non-empty")
    if np.any(s < 0) or np.any(b < 0):
        raise ValueError("squared gradient norms cannot be negative")
    s_mean, b_mean = float(s.mean()), float(b.mean())
    g2 = (bb * b_mean - bs * s_mean) / (bb - bs)
    trace = (s_mean - b_mean) / (1.0 / bs - 1.0 / bb)
    return g2, trace


def gradient_noise_scale(sq_norm_small, sq_norm_big, b_small: float, b_big: float) -> float:
    """The simple noise scale ``B_simple = tr(Sigma) / |G|^2`` from the two-batch estimator.

    McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training"): B_simple equals the
    full B_noise = tr(H Sigma)/(G^T H G) when the Hessian H is a multiple of the identity, and
    the critical batch B_crit (the best steps/examples trade-off) is close to B_noise.
    Unit: examples. Raises ValueError when the estimated |G|^2 is not positive or the
    estimated tr(Sigma) is negative (too few measurements: average more batches).
    """
    g2, trace = noise_scale_components(sq_norm_small, sq_norm_big, b_small, b_big)
    if g2 <= 0:
        raise ValueError(f"estimated |G|^2 = {g2:.3g} is not positive: the noise swamps the signal; "
                         "average |G_B|^2 over more batches or use a larger b_big")
    if trace < 0:
        raise ValueError(f"estimated tr(Sigma) = {trace:.3g} is negative: the gradient noise is below the "
                         "measurement noise; average |G_B|^2 over more batches or use a smaller b_small")
    return trace / g2


def linear_regression_gradient_stats(w, w_star, noise_std: float) -> tuple[np.ndarray, float]:
    """True gradient G and tr(Sigma) for the loss ``0.5 (x.w - y)^2`` with ``x ~ N(0, I_d)``,
    ``y = x.w_star + eps``, ``eps ~ N(0, noise_std^2)``.

    The per-example gradient is ``g = x (x.delta - eps)`` with ``delta = w - w_star``. Then
    ``G = E[g] = delta`` and, by Isserlis' theorem for Gaussian x,
    ``E[g g^T] = (|delta|^2 + noise_std^2) I + 2 delta delta^T``, so
    ``Sigma = (|delta|^2 + noise_std^2) I + delta delta^T`` and
    ``tr(Sigma) = d (|delta|^2 + noise_std^2) + |delta|^2``.
    """
    w = np.asarray(w, dtype=float).ravel()
    w_star = np.asarray(w_star, dtype=float).ravel()
    if w.shape != w_star.shape or w.size == 0:
        raise ValueError(f"w and w_star must be non-empty vectors of the same length, got {w.shape} and {w_star.shape}")
    noise_std = _pos_real("noise_std", noise_std, allow_zero=True)
    delta = w - w_star
    d2 = float(delta @ delta)
    return delta, w.size * (d2 + noise_std ** 2) + d2


def linear_regression_noise_scale(w, w_star, noise_std: float) -> float:
    """Exact ``B_simple = tr(Sigma)/|G|^2 = d (1 + noise_std^2/|delta|^2) + 1`` for the Gaussian
    linear-regression problem of `linear_regression_gradient_stats`. Raises ValueError at the
    optimum (``w == w_star``), where |G| = 0 and the noise scale is infinite."""
    g, trace = linear_regression_gradient_stats(w, w_star, noise_std)
    g2 = float(g @ g)
    if g2 == 0:
        raise ValueError("w equals w_star: the true gradient is zero and B_simple is infinite")
    return trace / g2


def optimal_lr_noise_model(batch, lr_max: float, b_noise: float):
    """McCandlish et al. 2018 (section 2.2): the best SGD step size at batch B,
    ``lr_opt(B) = lr_max / (1 + B_noise / B)``.

    For B << B_noise it grows linearly with B (the linear scaling rule); for B >> B_noise it
    saturates at lr_max (the noise-free step). Accepts a scalar or an array of batch sizes.
    """
    lr_max = _pos_real("lr_max", lr_max)
    b_noise = _pos_real("b_noise", b_noise)
    b = np.asarray(batch, dtype=float)
    if np.any(~np.isfinite(b)) or np.any(b <= 0):
        raise ValueError(f"batch sizes must be positive, got {batch!r}")
    out = lr_max / (1.0 + b_noise / b)
    return float(out) if out.ndim == 0 else out


def steps_examples_tradeoff(batch, b_crit: float):
    """McCandlish et al. 2018 (section 2.3, from (S/S_min - 1)(E/E_min - 1) = 1): ``(S/S_min, E/E_min) = (1 + B_crit/B, 1 + B/B_crit)``.

    S: optimizer steps to reach a given loss; E: examples processed. At B = B_crit both are
    twice their minimum; well below it steps are wasted, well above it examples (compute) are.
    """
    b_crit = _pos_real("b_crit", b_crit)
    b = np.asarray(batch, dtype=float)
    if np.any(~np.isfinite(b)) or np.any(b <= 0):
        raise ValueError(f"batch sizes must be positive, got {batch!r}")
    s, e = 1.0 + b_crit / b, 1.0 + b / b_crit
    return (float(s), float(e)) if b.ndim == 0 else (s, e)


def plan_per_gpu_batch(b_crit: int, n_gpus: int, min_per_gpu: int = 1) -> tuple[int, int, int]:
    """Split a global batch of at most `b_crit` examples over `n_gpus` GPUs.

    Returns ``(per_gpu_batch, dp, model_parallel)``: `dp` is the largest divisor of `n_gpus`
    with ``dp * min_per_gpu <= b_crit`` (data-parallel replicas), the other
    ``model_parallel = n_gpus // dp`` GPUs per replica go to tensor/pipeline parallelism, and
    ``per_gpu_batch = b_crit // dp`` so that the global batch ``per_gpu_batch * dp <= b_crit``.

    CH26-16: b_crit=4096, 16 GPUs -> (256, 16, 1); 128 GPUs -> (32, 128, 1); 128 GPUs when a
    GPU needs at least 64 examples to be efficient -> (64, 64, 2).
    """
    b_crit = _pos_int("b_crit", b_crit)
    n_gpus = _pos_int("n_gpus", n_gpus)
    min_per_gpu = _pos_int("min_per_gpu", min_per_gpu)
    if min_per_gpu > b_crit:
        raise ValueError(f"min_per_gpu={min_per_gpu} exceeds b_crit={b_crit}: not even one replica fits")
    dp = max(d for d in range(1, n_gpus + 1) if n_gpus % d == 0 and d * min_per_gpu <= b_crit)
    return b_crit // dp, dp, n_gpus // dp


# ---------------------------------------------------------------- variance of a mean gradient


def population_gradient_trace(per_example_grads) -> float:
    """``tr(Sigma)`` of a finite population of per-example gradients (rows), with the population
    (1/N) normalisation: the covariance of one gradient drawn uniformly from the rows."""
    g = np.asarray(per_example_grads, dtype=float)
    if g.ndim != 2 or g.shape[0] < 1:
        raise ValueError(f"per_example_grads must be a 2-D array (examples x parameters), got shape {g.shape}")
    return float(((g - g.mean(axis=0)) ** 2).sum(axis=1).mean())


def minibatch_gradient_variance(per_example_grads, batch_size: int, n_draws: int, rng) -> float:
    """Monte Carlo estimate of ``E|g_B - G|^2``: the mean over `n_draws` batches of B rows drawn
    with replacement (independent examples) of the squared distance between the batch-mean
    gradient and the population mean G. In expectation this is ``tr(Sigma)/B`` (CH26-26)."""
    g = np.asarray(per_example_grads, dtype=float)
    if g.ndim != 2 or g.shape[0] < 1:
        raise ValueError(f"per_example_grads must be a 2-D array (examples x parameters), got shape {g.shape}")
    b = _pos_int("batch_size", batch_size)
    n = _pos_int("n_draws", n_draws)
    full = g.mean(axis=0)
    idx = rng.integers(0, g.shape[0], size=(n, b))
    means = g[idx].mean(axis=1)
    return float(((means - full) ** 2).sum(axis=1).mean())


def loglog_slope(x, y) -> float:
    """Least-squares slope of log(y) against log(x): the exponent p of a power law y ~ x^p."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(f"x and y must be 1-D arrays of the same length >= 2, got {x.shape} and {y.shape}")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("a log-log fit needs positive x and y")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])
