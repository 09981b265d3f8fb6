"""Learning-rate schedules as plain functions of the optimizer step, plus the planning helpers
around them (restart positions, warmup/cooldown lengths, token budgets, a pretraining design
checker) and a learning-rate trace debugger.

Step convention (all functions): `step` is the 0-based index of the optimizer update, and the
value returned is the learning rate that update uses. That is the value a torch scheduler holds
after `step` calls to ``scheduler.step()`` (one call per optimizer step, none per micro-batch),
i.e. ``optimizer.param_groups[0]["lr"]`` just before the (step+1)-th ``optimizer.step()``.
Learning rates are floats in the optimizer's own units. A negative or non-integer step, a zero-length run or a
warmup longer than the run raises ValueError with the reason.

The batch-size helpers of `solutions_lib.batch_scaling` (scale_lr, tokens_per_step, the
gradient noise scale, ...) are re-exported here.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Callable

import numpy as np

from ._checks import count

from solutions_lib.batch_scaling import (  # noqa: F401  (re-exported)
    gradient_noise_scale,
    linear_regression_gradient_stats,
    linear_regression_noise_scale,
    linear_scaling_table,
    loglog_slope,
    minibatch_gradient_variance,
    noise_scale_components,
    optimal_lr_noise_model,
    plan_per_gpu_batch,
    population_gradient_trace,
    scale_lr,
    sequences_per_step,
    steps_examples_tradeoff,
    tokens_per_step,
)

TRACE_BUGS = ("ok", "not_scaled", "per_microbatch", "no_warmup", "wrong_restart")


# ---------------------------------------------------------------- validation


def _int(name: str, value, minimum: int = 0) -> int:
    return count(name, value, minimum)


def _step(step) -> int:
    return _int("step (0-based optimizer step)", step, 0)


def _real(name: str, value, lo: float = 0.0, lo_open: bool = True, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    value = float(value)
    if value < lo or (lo_open and value == lo):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {value:g}")
    if hi is not None and value > hi:
        raise ValueError(f"{name} must be <= {hi:g}, got {value:g}")
    return value


def _floor(name: str, value, peak: float, peak_name: str) -> float:
    value = _real(name, value, 0.0, lo_open=False)
    if value > peak:
        raise ValueError(f"{name}={value:g} must not exceed {peak_name}={peak:g}: the schedule would go up, not down")
    return value


def steps_from_fraction(total_steps: int, fraction: float) -> int:
    """Whole steps for a fraction of a run: ``ceil(fraction * total_steps)``, ignoring float noise.

    The rounding of Hugging Face ``TrainingArguments.get_warmup_steps`` (ceil), except that
    a product a hair above a whole number from float rounding (0.07 * 100 = 7.000000000000001
    in IEEE double, so a plain ceil gives 8) counts as that whole number (7). Used for warmup
    ratios and cooldown fractions.
    """
    total_steps = _int("total_steps", total_steps, 1)
    fraction = _real("fraction", fraction, 0.0, lo_open=False, hi=1.0)
    x = fraction * total_steps
    return int(math.ceil(x - 1e-9 * max(1.0, x)))


warmup_steps_from_ratio = steps_from_fraction


# ---------------------------------------------------------------- classic decays


def step_decay(step: int, base_lr: float, step_size: int, gamma: float) -> float:
    """``base_lr * gamma ** (step // step_size)``: multiply by gamma every `step_size` steps.

    Matches ``torch.optim.lr_scheduler.StepLR(opt, step_size, gamma)`` (base lr = base_lr)
    after `step` calls to ``scheduler.step()``.
    """
    step = _step(step)
    base_lr = _real("base_lr", base_lr)
    step_size = _int("step_size", step_size, 1)
    gamma = _real("gamma", gamma)
    return base_lr * gamma ** (step // step_size)


def polynomial_decay(step: int, base_lr: float, total_steps: int, power: float = 1.0, end_lr: float = 0.0) -> float:
    """``end_lr + (base_lr - end_lr) * (1 - min(step, T)/T) ** power`` with T = total_steps.

    Reaches end_lr at step T and stays there. With end_lr = 0 it matches
    ``torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=T, power=power)`` (torch has no
    end value); with end_lr it is the non-cycling ``PolynomialDecay`` of TensorFlow/Keras.
    power = 1 is the linear decay of BERT (Devlin et al. 2019).
    """
    step = _step(step)
    base_lr = _real("base_lr", base_lr)
    total_steps = _int("total_steps", total_steps, 1)
    power = _real("power", power)
    end_lr = _floor("end_lr", end_lr, base_lr, "base_lr")
    frac = 1.0 - min(step, total_steps) / total_steps
    return end_lr + (base_lr - end_lr) * frac ** power


# ---------------------------------------------------------------- warmup and cosine


def linear_warmup(step: int, peak_lr: float, warmup_steps: int) -> float:
    """``peak_lr * (step + 1) / warmup_steps`` for ``step < warmup_steps``, then ``peak_lr``.

    TSX-03 convention: step 50 of a 100-step warmup at peak 3e-4 -> 1.53e-4. The first update
    already uses peak/W and the last warmup step (W-1) reaches the peak. Matches
    ``LinearLR(opt, start_factor=1/W, end_factor=1.0, total_iters=W-1)`` with base lr = peak.
    Off by one against Hugging Face's ``get_linear_schedule_with_warmup`` (``peak * step / W``:
    zero at step 0, the peak at step W). ``warmup_steps = 0`` means no warmup (always the peak).
    """
    step = _step(step)
    peak_lr = _real("peak_lr", peak_lr)
    warmup_steps = _int("warmup_steps", warmup_steps, 0)
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    return peak_lr


def warmup_cosine(step: int, peak_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0,
                  convention: str = "course") -> float:
    """Linear warmup (`linear_warmup`) then a half cosine from peak_lr down to min_lr.

    With W = warmup_steps, T = total_steps and ``p = (step - W) / (T - W - 1)``::

        lr = min_lr + (peak_lr - min_lr) * (1 + cos(pi * p)) / 2      for W <= step < T

    so step W starts the decay at the peak and the last step of the run, T-1, trains at min_lr
    (the TH-03 convention; Loshchilov & Hutter 2017 for the cosine). Past the run (step >= T)
    the value stays at min_lr; torch's cosine would climb back up. When W = T-1 the single
    decay step is at min_lr. Twin: ``SequentialLR([LinearLR(1/W, 1, total_iters=W-1),
    CosineAnnealingLR(T_max=T-W-1, eta_min=min_lr)], milestones=[W])``. Hugging Face's
    ``get_cosine_schedule_with_warmup`` divides by T-W instead (it reaches 0 only at step T,
    which never runs). Raises ValueError when ``warmup_steps >= total_steps``.

    ``convention`` names where the warmup starts and where the decay lands:

    * ``"course"`` (the default, TH-03): warmup ``peak * (step + 1) / W`` (the first update
      already uses peak/W), decay over ``T - W - 1`` steps, so step T-1 trains at min_lr;
    * ``"hf"``: Hugging Face's ``get_cosine_schedule_with_warmup`` (min_lr = 0) and
      ``get_cosine_with_min_lr_schedule_with_warmup`` (``min_lr_rate = min_lr / peak_lr``):
      warmup ``peak * step / W`` (step 0 trains at 0, the peak is reached at step W), decay
      progress ``(step - W) / (T - W)``, so min_lr is reached only at step T, one past the run.
      Past the run (step >= T) the value stays at min_lr here too, where transformers' cosine
      would climb back.
    """
    if convention not in ("course", "hf"):
        raise ValueError(f'convention must be "course" (warmup from peak/W) or "hf" (warmup from 0, '
                         f'Hugging Face), got {convention!r}')
    step = _step(step)
    peak_lr = _real("peak_lr", peak_lr)
    total_steps = _int("total_steps", total_steps, 1)
    warmup_steps = _int("warmup_steps", warmup_steps, 0)
    min_lr = _floor("min_lr", min_lr, peak_lr, "peak_lr")
    if warmup_steps >= total_steps:
        raise ValueError(f"warmup_steps={warmup_steps} must be shorter than the run (total_steps={total_steps}), "
                         "otherwise there is no decay")
    if convention == "hf":
        if step < warmup_steps:
            return peak_lr * step / warmup_steps
        if step >= total_steps:
            return min_lr
        p = (step - warmup_steps) / (total_steps - warmup_steps)
        return min_lr + (peak_lr - min_lr) * (1.0 + math.cos(math.pi * p)) / 2.0
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    span = total_steps - warmup_steps - 1
    if step >= total_steps - 1:
        return min_lr
    p = (step - warmup_steps) / span
    return min_lr + (peak_lr - min_lr) * (1.0 + math.cos(math.pi * p)) / 2.0


def _sgdr_cycle(step: int, t0: int, t_mult: int) -> tuple[int, int]:
    """(steps since the last restart, length of the current cycle), in exact integers."""
    if t_mult == 1:
        return step % t0, t0
    start, length = 0, t0
    while step >= start + length:
        start += length
        length *= t_mult
    return step - start, length


def cosine_with_restarts(step: int, max_lr: float, t0: int, t_mult: int = 1, min_lr: float = 0.0) -> float:
    """SGDR (Loshchilov & Hutter 2017): cosine from max_lr towards min_lr, restarted at max_lr.

    ``lr = min_lr + (max_lr - min_lr) * (1 + cos(pi * T_cur / T_i)) / 2``, where cycle i lasts
    ``T_i = t0 * t_mult**i`` steps and T_cur counts steps since the last restart. Restarts fall
    at t0, t0 + t0*t_mult, ... (see `sgdr_restarts`); the step before a restart is near, not
    at, min_lr. Matches ``CosineAnnealingWarmRestarts(opt, T_0=t0, T_mult=t_mult,
    eta_min=min_lr)`` stepped with ``scheduler.step()`` once per optimizer step (torch also
    requires integer t0 >= 1, t_mult >= 1). Computed in exact integer arithmetic: torch's
    ``scheduler.step(epoch)`` path finds the cycle with a float logarithm and can misplace a
    restart (t0=1, T_mult=10, epoch 111 gives eta_min instead of max_lr).
    """
    step = _step(step)
    max_lr = _real("max_lr", max_lr)
    t0 = _int("t0", t0, 1)
    t_mult = _int("t_mult", t_mult, 1)
    min_lr = _floor("min_lr", min_lr, max_lr, "max_lr")
    t_cur, t_i = _sgdr_cycle(step, t0, t_mult)
    return min_lr + (max_lr - min_lr) * (1.0 + math.cos(math.pi * t_cur / t_i)) / 2.0


def sgdr_restarts(t0: int, t_mult: int, total_steps: int) -> list[int]:
    """Steps in ``(0, total_steps)`` at which SGDR jumps back to max_lr:
    ``t0 * (1 + t_mult + ... + t_mult**(k-1))`` for k = 1, 2, ...

    Example: t0=10, t_mult=2, 200 steps -> [10, 30, 70, 150].
    """
    t0 = _int("t0", t0, 1)
    t_mult = _int("t_mult", t_mult, 1)
    total_steps = _int("total_steps", total_steps, 1)
    out, pos, length = [], t0, t0
    while pos < total_steps:
        out.append(pos)
        length *= t_mult
        pos += length
    return out


def one_cycle(step: int, max_lr: float, total_steps: int, pct_start: float = 0.3,
              div_factor: float = 25.0, final_div_factor: float = 1e4) -> float:
    """The one-cycle policy (Smith & Topin 2019) as torch implements it.

    Matches ``OneCycleLR(opt, max_lr, total_steps=T, pct_start, anneal_strategy="cos",
    div_factor, final_div_factor, three_phase=False)`` (momentum cycling aside). With
    ``lr0 = max_lr / div_factor``, ``lr_end = lr0 / final_div_factor`` and the float
    ``e = pct_start * T - 1``::

        step <= e : cos-anneal lr0 -> max_lr,    pct = step / e
        step >  e : cos-anneal max_lr -> lr_end, pct = (step - e) / (T - 1 - e)
        cos-anneal(a -> b, pct) = b + (a - b) * (1 + cos(pi * pct)) / 2

    so max_lr falls at step e when e is whole (299 for T=1000, pct_start=0.3) and lr_end at
    step T-1. Defined for steps 0..T-1: torch also lets the scheduler reach step T (an
    extrapolated value) and raises past it; here any ``step >= total_steps`` raises
    ValueError. ``pct_start * total_steps`` must exceed 1 (torch would divide by zero).
    """
    step = _step(step)
    max_lr = _real("max_lr", max_lr)
    total_steps = _int("total_steps", total_steps, 2)
    pct_start = _real("pct_start", pct_start, 0.0, hi=1.0)
    div_factor = _real("div_factor", div_factor)
    final_div_factor = _real("final_div_factor", final_div_factor)
    end_up = pct_start * total_steps - 1.0
    if end_up <= 0 or end_up >= total_steps - 1:
        raise ValueError(f"pct_start * total_steps = {pct_start * total_steps:g} must lie strictly between 1 and "
                         f"total_steps = {total_steps}: each phase needs at least one step")
    if step >= total_steps:
        raise ValueError(f"step {step} is past the end of the one-cycle run (steps 0..{total_steps - 1})")
    lr0 = max_lr / div_factor
    lr_end = lr0 / final_div_factor
    if step <= end_up:
        a, b, pct = lr0, max_lr, step / end_up
    else:
        a, b, pct = max_lr, lr_end, (step - end_up) / (total_steps - 1 - end_up)
    return b + (a - b) * (1.0 + math.cos(math.pi * pct)) / 2.0


def inverse_sqrt(step: int, d_model: int, warmup_steps: int) -> float:
    """The Transformer schedule (Vaswani et al. 2017, eq. 3), with ``n = step + 1``::

        lr = d_model ** -0.5 * min(n ** -0.5, n * warmup_steps ** -1.5)

    The paper counts step_num from 1; here n = step + 1 for the 0-based step. Linear warmup to
    the peak ``(d_model * warmup_steps) ** -0.5`` at n = warmup_steps (step W-1), then decay
    as 1/sqrt(n). d_model=512, warmup 4000: peak 6.99e-4. No torch scheduler implements it.
    """
    step = _step(step)
    d_model = _int("d_model", d_model, 1)
    warmup_steps = _int("warmup_steps", warmup_steps, 1)
    n = step + 1
    return d_model ** -0.5 * min(n ** -0.5, n * warmup_steps ** -1.5)


def inverse_sqrt_peak(d_model: int, warmup_steps: int) -> tuple[int, float]:
    """(0-based step, value) of the inverse-sqrt peak: ``(W - 1, (d_model * W) ** -0.5)``."""
    d_model = _int("d_model", d_model, 1)
    warmup_steps = _int("warmup_steps", warmup_steps, 1)
    return warmup_steps - 1, (d_model * warmup_steps) ** -0.5


# ---------------------------------------------------------------- warmup-stable-decay


def wsd_decay_steps(total_steps: int, decay_fraction: float) -> int:
    """Cooldown length of a WSD run: ``steps_from_fraction(total_steps, decay_fraction)``."""
    return steps_from_fraction(total_steps, decay_fraction)


def wsd(step: int, peak_lr: float, warmup_steps: int, total_steps: int, decay_fraction: float = 0.1,
        min_lr: float = 0.0, shape: str = "linear") -> float:
    """Warmup-stable-decay (MiniCPM, Hu et al. 2024; Hagele et al. 2024): warmup, a constant
    peak, and a cooldown over the last ``D = steps_from_fraction(total_steps, decay_fraction)``
    steps, which start at ``S = total_steps - D``::

        step < W       : peak_lr * (step + 1) / W                  (as `linear_warmup`)
        W <= step < S  : peak_lr
        S <= step < T  : min_lr + (peak_lr - min_lr) * f(x),  x = (step - S + 1) / D
                         f(x) = 1 - x ("linear") or 1 - sqrt(x) ("sqrt", the 1-sqrt cooldown)
        step >= T      : min_lr

    The cooldown mirrors the warmup: its first step is already below the peak and its last
    step (T-1) trains at min_lr. Linear twin: ``SequentialLR([LinearLR(1/W, 1, W-1),
    ConstantLR(factor=1.0), LinearLR(1 - (1-m)/D, m, D-1)], milestones=[W, S])`` with
    m = min_lr/peak_lr; the sqrt shape has no torch twin. Raises ValueError when warmup and
    cooldown overlap (W + D > T) or for an unknown shape.
    """
    step = _step(step)
    peak_lr = _real("peak_lr", peak_lr)
    warmup_steps = _int("warmup_steps", warmup_steps, 0)
    total_steps = _int("total_steps", total_steps, 1)
    decay = steps_from_fraction(total_steps, decay_fraction)
    min_lr = _floor("min_lr", min_lr, peak_lr, "peak_lr")
    if shape not in ("linear", "sqrt"):
        raise ValueError(f"shape must be 'linear' or 'sqrt', got {shape!r}")
    if warmup_steps + decay > total_steps:
        raise ValueError(f"warmup ({warmup_steps} steps) and cooldown ({decay} steps) do not fit in "
                         f"total_steps={total_steps}")
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    start = total_steps - decay
    if step < start:
        return peak_lr
    if step >= total_steps:
        return min_lr
    x = (step - start + 1) / decay
    f = 1.0 - x if shape == "linear" else 1.0 - math.sqrt(x)
    return min_lr + (peak_lr - min_lr) * f


def tokens_before_cooldown(total_steps: int, decay_fraction: float, tokens_per_step: int) -> int:
    """Tokens trained before the WSD cooldown starts: ``(T - D) * tokens_per_step``.

    Steps 0..S-1 (S = T - D) run at or below the peak before the first cooldown step S.
    Example: 50,000 steps, 20% cooldown, 2^20 tokens/step -> 40,000 * 1,048,576 tokens.
    """
    total_steps = _int("total_steps", total_steps, 1)
    tps = _int("tokens_per_step", tokens_per_step, 1)
    return (total_steps - wsd_decay_steps(total_steps, decay_fraction)) * tps


def fit_schedule_to_budget(token_budget: int, tokens_per_step: int, warmup_ratio: float = 0.01,
                           decay_fraction: float = 0.2) -> dict:
    """Step counts of a WSD schedule that trains on a token budget.

    ``total_steps = ceil(token_budget / tokens_per_step)`` (the fewest steps that reach the
    budget; the overshoot is under one step), ``warmup_steps`` and ``decay_steps`` from the
    fractions via `steps_from_fraction`, ``cooldown_start = total_steps - decay_steps`` and
    ``tokens_trained = total_steps * tokens_per_step``. Example: 20e9 tokens at 2,097,152
    tokens/step -> 9537 steps, warmup 96, cooldown 1908 steps from step 7629.
    """
    budget = _int("token_budget", token_budget, 1)
    tps = _int("tokens_per_step", tokens_per_step, 1)
    total = -(-budget // tps)
    warm = steps_from_fraction(total, warmup_ratio)
    decay = steps_from_fraction(total, decay_fraction)
    if warm + decay > total:
        raise ValueError(f"warmup ({warm}) and cooldown ({decay}) steps exceed the {total} steps of the budget")
    return {"total_steps": total, "warmup_steps": warm, "decay_steps": decay,
            "cooldown_start": total - decay, "tokens_trained": total * tps}


# ---------------------------------------------------------------- pretraining design (LRS-10)

#: The rules a pretraining schedule design must satisfy (checked by `check_pretraining_design`).
DESIGN_RULES = {
    "warmup_ratio": (0.01, 0.05),      # warmup_steps / total_steps
    "decay_fraction": (0.10, 0.25),    # WSD cooldown steps / total_steps
    "batch_fill": 0.5,                 # tokens_per_step >= batch_fill * max_batch_tokens
    "min_lr_ratio": 0.1,               # min_lr <= min_lr_ratio * peak_lr
    "first_lr_ratio": 0.1,             # lr at step 0 <= first_lr_ratio * peak_lr
    "lr_rule": "sqrt",                 # peak_lr = scale_lr(ref_lr, ref_batch, global_batch, "sqrt")
}

_PROBLEM_KEYS = ("token_budget", "seq_len", "n_gpus", "max_micro_batch", "max_batch_tokens", "ref_lr", "ref_batch")
_DESIGN_KEYS = ("micro_batch", "grad_accum", "global_batch", "tokens_per_step", "total_steps",
                "warmup_steps", "decay_steps", "peak_lr", "min_lr", "lr_at")


def _check_problem(problem: dict) -> dict:
    missing = [k for k in _PROBLEM_KEYS if k not in problem]
    if missing:
        raise ValueError(f"problem is missing {missing}")
    p = dict(problem)
    for k in ("token_budget", "seq_len", "n_gpus", "max_micro_batch", "max_batch_tokens", "ref_batch"):
        p[k] = _int(k, p[k], 1)
    p["ref_lr"] = _real("ref_lr", p["ref_lr"])
    if p["n_gpus"] * p["seq_len"] > p["max_batch_tokens"]:
        raise ValueError("one sequence per GPU already exceeds max_batch_tokens: no design fits")
    return p


def design_pretraining_schedule(problem: dict) -> dict:
    """A reference design meeting `DESIGN_RULES` for a pretraining `problem` (LRS-10).

    problem: token_budget (tokens), seq_len (tokens), n_gpus (data-parallel ranks),
    max_micro_batch (sequences per GPU per micro-step that fit in memory), max_batch_tokens
    (the critical batch, tokens per optimizer step), ref_lr tuned at ref_batch (sequences).
    The micro-batch is the largest that fits in memory and still lets ``micro * accum``
    sequences per GPU fill at least half the critical batch, warmup 2%, 1-sqrt cooldown over 20%,
    peak by the square-root rule, min_lr = peak/10.
    """
    p = _check_problem(problem)
    per_gpu = p["max_batch_tokens"] // (p["n_gpus"] * p["seq_len"])
    for micro in range(min(p["max_micro_batch"], per_gpu), 0, -1):
        accum = per_gpu // micro
        if 2 * micro * accum * p["n_gpus"] * p["seq_len"] >= p["max_batch_tokens"]:
            break
    global_batch = micro * accum * p["n_gpus"]
    tps = global_batch * p["seq_len"]
    plan = fit_schedule_to_budget(p["token_budget"], tps, warmup_ratio=0.02, decay_fraction=0.2)
    peak = scale_lr(p["ref_lr"], p["ref_batch"], global_batch, DESIGN_RULES["lr_rule"])
    min_lr = 0.1 * peak
    total, warm = plan["total_steps"], plan["warmup_steps"]

    def lr_at(step: int) -> float:
        return wsd(step, peak, warm, total, 0.2, min_lr, "sqrt")

    return {"micro_batch": micro, "grad_accum": accum, "global_batch": global_batch, "tokens_per_step": tps,
            "total_steps": total, "warmup_steps": warm, "decay_steps": plan["decay_steps"],
            "peak_lr": peak, "min_lr": min_lr, "lr_at": lr_at}


def _ceil_fraction(total_steps: int, fraction: float) -> int:
    # steps_from_fraction's arithmetic inline: the checker must run where the answers are withheld
    x = fraction * total_steps
    return int(math.ceil(x - 1e-9 * max(1.0, x)))


def _is_whole(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, (Integral, Real)) and math.isfinite(float(x)) and float(x).is_integer()


def check_pretraining_design(design: dict, problem: dict) -> list[str]:
    """Every way `design` breaks `DESIGN_RULES` for `problem`, as sentences (empty: all good).

    Checks: the batch arithmetic (global = micro * n_gpus * accum sequences, tokens = global *
    seq_len, micro within memory, tokens per step between half the critical batch and the
    critical batch), the step count (the fewest steps that reach the token budget), warmup and
    cooldown fractions, the peak (square-root rule from the reference), min_lr, and the shape
    of ``lr_at(step)`` over the whole run: starts low, non-decreasing warmup, flat at the peak
    between warmup and cooldown, non-increasing cooldown, ending exactly at min_lr.
    """
    p = _check_problem(problem)
    if not isinstance(design, dict):
        return [f"the design must be a dict with keys {list(_DESIGN_KEYS)}, got {type(design).__name__}"]
    missing = [k for k in _DESIGN_KEYS if k not in design]
    if missing:
        return [f"the design dict is missing {missing}"]
    bad = []
    ints = ("micro_batch", "grad_accum", "global_batch", "tokens_per_step", "total_steps", "warmup_steps", "decay_steps")
    for k in ints:
        if not _is_whole(design[k]) or design[k] < 1:
            bad.append(f"{k} must be a whole number >= 1, got {design[k]!r}")
    if bad:
        return bad
    d = {k: int(design[k]) for k in ints}
    if d["micro_batch"] > p["max_micro_batch"]:
        bad.append(f"micro_batch={d['micro_batch']} sequences does not fit in memory (max {p['max_micro_batch']})")
    if d["global_batch"] != d["micro_batch"] * p["n_gpus"] * d["grad_accum"]:
        bad.append(f"global_batch={d['global_batch']} but micro_batch * n_gpus * grad_accum = "
                   f"{d['micro_batch'] * p['n_gpus'] * d['grad_accum']} sequences")
    if d["tokens_per_step"] != d["global_batch"] * p["seq_len"]:
        bad.append(f"tokens_per_step={d['tokens_per_step']} but global_batch * seq_len = {d['global_batch'] * p['seq_len']}")
    tps = d["tokens_per_step"]
    lo = DESIGN_RULES["batch_fill"] * p["max_batch_tokens"]
    if not lo <= tps <= p["max_batch_tokens"]:
        bad.append(f"tokens_per_step={tps} must lie in [{lo:.0f}, {p['max_batch_tokens']}]: above the critical "
                   "batch wastes compute, far below it wastes steps")
    need = -(-p["token_budget"] // tps)
    if d["total_steps"] != need:
        bad.append(f"total_steps={d['total_steps']} but the fewest steps of {tps} tokens that reach "
                   f"{p['token_budget']} tokens is {need} (ceil)")
    T, W, D = d["total_steps"], d["warmup_steps"], d["decay_steps"]
    # the bounds rounded up as the notebook's steps_from_fraction rounds (issue 15: a warmup of
    # steps_from_fraction(T, 0.05) steps is 5 % of the run, even when it is a hair above 0.05 T)
    wlo, whi = DESIGN_RULES["warmup_ratio"]
    w_min, w_max = _ceil_fraction(T, wlo), _ceil_fraction(T, whi)
    if not w_min <= W <= w_max:
        bad.append(f"warmup_steps={W} must lie in [{w_min}, {w_max}]: {wlo:.0%} to {whi:.0%} of the {T} steps, "
                   "rounded up as steps_from_fraction rounds")
    dlo, dhi = DESIGN_RULES["decay_fraction"]
    d_min, d_max = _ceil_fraction(T, dlo), _ceil_fraction(T, dhi)
    if not d_min <= D <= d_max:
        bad.append(f"decay_steps={D} must lie in [{d_min}, {d_max}]: {dlo:.0%} to {dhi:.0%} of the {T} steps, "
                   "rounded up as steps_from_fraction rounds")
    if W + D > T:
        bad.append(f"warmup ({W}) and cooldown ({D}) overlap in a run of {T} steps")
    try:
        peak, min_lr = float(design["peak_lr"]), float(design["min_lr"])
    except (TypeError, ValueError):
        return bad + [f"peak_lr and min_lr must be numbers, got {design['peak_lr']!r}, {design['min_lr']!r}"]
    # the rule inline, not scale_lr: the checker must also run where the answers are withheld (course/withheld_view.py)
    k = float(d["global_batch"]) / float(p["ref_batch"])
    want = float(p["ref_lr"]) * (math.sqrt(k) if DESIGN_RULES["lr_rule"] == "sqrt" else k)
    if not math.isclose(peak, want, rel_tol=1e-6):
        bad.append(f"peak_lr={peak:.6g} but the square-root rule from {p['ref_lr']:g} at {p['ref_batch']} "
                   f"sequences gives {want:.6g} at {d['global_batch']} sequences")
    if not 0 <= min_lr <= DESIGN_RULES["min_lr_ratio"] * peak * (1 + 1e-12):
        bad.append(f"min_lr={min_lr:.6g} must lie in [0, {DESIGN_RULES['min_lr_ratio']} * peak_lr]")
    if bad or T > 2_000_000:
        return bad
    try:
        lr = np.array([float(design["lr_at"](s)) for s in range(T)])
    except Exception as e:  # noqa: BLE001  (a student's lr_at may raise anything; report it)
        return bad + [f"lr_at(step) failed: {type(e).__name__}: {e}"]
    tol = 1e-9 * peak
    if not np.all(np.isfinite(lr)) or lr.min() < -tol or lr.max() > peak + tol:
        bad.append(f"lr_at must stay within [0, peak_lr={peak:.6g}], got range [{lr.min():.6g}, {lr.max():.6g}]")
    if lr[0] > DESIGN_RULES["first_lr_ratio"] * peak + tol:
        bad.append(f"lr_at(0)={lr[0]:.6g}: a warmup starts at most {DESIGN_RULES['first_lr_ratio']} * peak_lr")
    if np.any(np.diff(lr[:W + 1]) < -tol):
        bad.append("the warmup (steps 0..warmup_steps) must not decrease")
    stable = lr[W:T - D]
    if stable.size and np.max(np.abs(stable - peak)) > 1e-6 * peak:
        i = W + int(np.argmax(np.abs(stable - peak)))
        bad.append(f"between warmup and cooldown the lr must stay at peak_lr={peak:.6g}; lr_at({i})={lr[i]:.6g}")
    if np.any(np.diff(lr[T - D - 1:]) > tol):
        bad.append(f"the cooldown (steps {T - D}..{T - 1}) must not increase")
    if not math.isclose(lr[-1], min_lr, rel_tol=1e-6, abs_tol=1e-12 * peak):
        bad.append(f"the last step ({T - 1}) must train at min_lr={min_lr:.6g}, got {lr[-1]:.6g}")
    return bad


def random_pretraining_problem(rng) -> dict:
    """A feasible random LRS-10 problem (used by the hidden tests)."""
    n_gpus = int(rng.choice([8, 16, 32, 64, 128]))
    seq_len = int(rng.choice([512, 1024, 2048, 4096]))
    max_batch_tokens = n_gpus * seq_len * int(rng.integers(1, 40)) + int(rng.integers(0, seq_len))
    steps = int(rng.integers(1500, 12000))
    return {"token_budget": int(max_batch_tokens * 0.8 * steps) + int(rng.integers(1, 10 ** 6)),
            "seq_len": seq_len, "n_gpus": n_gpus, "max_micro_batch": int(rng.choice([1, 2, 4, 8, 16])),
            "max_batch_tokens": max_batch_tokens, "ref_lr": float(10 ** rng.uniform(-4, -3)),
            "ref_batch": int(rng.choice([64, 128, 256, 512]))}


# ---------------------------------------------------------------- learning-rate traces (LES-10.3)


def lr_curve(schedule: Callable[..., float], n_steps: int, **kwargs) -> np.ndarray:
    """``[schedule(s, **kwargs) for s in range(n_steps)]`` as an array (for plots and traces)."""
    n_steps = _int("n_steps", n_steps, 1)
    return np.array([schedule(s, **kwargs) for s in range(n_steps)], dtype=float)


def torch_lr_trace(make_scheduler: Callable, n_steps: int, lr: float = 1.0) -> np.ndarray:
    """The learning rate a torch optimizer uses at each of its first `n_steps` updates when
    ``make_scheduler(optimizer)`` is stepped once per update: the oracle our functions match.

    Uses an SGD optimizer (lr = `lr`) on one dummy parameter; torch's warnings about
    SequentialLR internals are silenced.
    """
    import warnings

    import torch

    n_steps = _int("n_steps", n_steps, 1)
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=lr)
    out = np.empty(n_steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = make_scheduler(opt)
        for i in range(n_steps):
            out[i] = opt.param_groups[0]["lr"]
            opt.step()
            sched.step()
    return out


def _restarts(trace: np.ndarray, jump: float) -> list[int]:
    return [int(i) + 1 for i in np.flatnonzero(np.diff(trace) > jump)]


def diagnose_lr_trace(logged, intended, grad_accum: int = 1, rtol: float = 1e-4) -> str:
    """Name the bug that turned the `intended` learning rates (one per optimizer step) into the
    `logged` ones. Returns one of `TRACE_BUGS`, checked in this order, else "unknown":

    - "ok": logged equals intended (to rtol; logs are often float32);
    - "not_scaled": logged / intended is one constant other than 1 (the batch-size scaling of
      the peak was skipped or applied twice; the shape is right, the size is not);
    - "per_microbatch": ``logged[t] == intended[grad_accum * t]`` wherever that exists (the
      scheduler was stepped once per micro-batch, so the schedule runs grad_accum times fast);
    - "no_warmup": the intended run starts below half its peak, the logged one above 0.9 of it;
    - "wrong_restart": the steps where the lr jumps up by more than half the peak differ.
    """
    logged = np.asarray(logged, dtype=float)
    intended = np.asarray(intended, dtype=float)
    if logged.shape != intended.shape or logged.ndim != 1 or logged.size < 2:
        raise ValueError(f"logged and intended must be 1-D traces of the same length >= 2, "
                         f"got {logged.shape} and {intended.shape}")
    k = _int("grad_accum", grad_accum, 1)
    peak = float(intended.max())
    if peak <= 0:
        raise ValueError("the intended trace must have a positive peak")
    atol = 1e-9 * peak

    def same(a, b):
        return bool(np.allclose(a, b, rtol=rtol, atol=atol))

    if same(logged, intended):
        return "ok"
    mask = intended > 1e-3 * peak
    ratio = logged[mask] / intended[mask]
    if ratio.size and np.allclose(ratio, ratio[0], rtol=10 * rtol) and abs(ratio[0] - 1) > 10 * rtol:
        return "not_scaled"
    if k > 1:
        t = np.arange(0, (logged.size - 1) // k + 1)
        if same(logged[t], intended[k * t]):
            return "per_microbatch"
    if intended[0] < 0.5 * peak and logged[0] > 0.9 * peak:
        return "no_warmup"
    if _restarts(logged, 0.5 * peak) != _restarts(intended, 0.5 * peak):
        return "wrong_restart"
    return "unknown"


def _kit_warmup_cosine(s: int, peak: float, w: int, n: int, min_lr: float) -> float:
    """`warmup_cosine` for `simulate_lr_trace`'s valid arguments, without its checks: the trace
    generator is a kit helper and must work in a grading kernel, where the answers are withheld
    (course/withheld_view.py). Same arithmetic, so the same floats."""
    if s < w:
        return peak * (s + 1) / w
    if s >= n - 1:
        return min_lr
    return min_lr + (peak - min_lr) * (1.0 + math.cos(math.pi * ((s - w) / (n - w - 1)))) / 2.0


def _kit_cosine_with_restarts(s: int, peak: float, t0: int, t_mult: int, min_lr: float) -> float:
    """`cosine_with_restarts` for `simulate_lr_trace` (see `_kit_warmup_cosine`)."""
    t_cur, t_i = _sgdr_cycle(s, t0, t_mult)
    return min_lr + (peak - min_lr) * (1.0 + math.cos(math.pi * t_cur / t_i)) / 2.0


def _kit_sgdr_restarts(t0: int, t_mult: int, total_steps: int) -> list[int]:
    """`sgdr_restarts` for `simulate_lr_trace` (see `_kit_warmup_cosine`)."""
    out, pos, length = [], t0, t0
    while pos < total_steps:
        out.append(pos)
        length *= t_mult
        pos += length
    return out


def simulate_lr_trace(rng, bug: str | None = None) -> dict:
    """A random intended schedule and its logged trace with `bug` (one of `TRACE_BUGS`; random
    when None). Returns ``{"logged", "intended", "grad_accum", "bug", "family"}``; the logged
    values are rounded to float32, as a logger would store them.

    Families: "warmup_cosine" (for "no_warmup") and "sgdr" (for "wrong_restart"); "ok",
    "not_scaled" and "per_microbatch" use either. "per_microbatch" always has grad_accum >= 2.
    """
    if bug is None:
        bug = str(rng.choice(TRACE_BUGS))
    if bug not in TRACE_BUGS:
        raise ValueError(f"bug must be one of {TRACE_BUGS}, got {bug!r}")
    family = {"no_warmup": "warmup_cosine", "wrong_restart": "sgdr"}.get(bug) or str(rng.choice(["warmup_cosine", "sgdr"]))
    n = int(rng.integers(300, 1500))
    peak = float(10 ** rng.uniform(-4.5, -2))
    min_lr = float(peak * rng.choice([0.0, 0.01, 0.1]))
    k = int(rng.choice([2, 4, 8])) if bug == "per_microbatch" else int(rng.choice([1, 2, 4, 8]))
    if family == "warmup_cosine":
        warm = int(rng.integers(max(10, n // 50), n // 10))

        def sched(s, w=warm):
            return _kit_warmup_cosine(s, peak, w, n, min_lr)
    else:
        t0 = int(rng.integers(n // 10, n // 4))
        t_mult = int(rng.choice([1, 2]))

        def sched(s, t0=t0, t_mult=t_mult):
            return _kit_cosine_with_restarts(s, peak, t0, t_mult, min_lr)
    intended = np.array([sched(s) for s in range(n)])
    if bug == "ok":
        logged = intended.copy()
    elif bug == "not_scaled":
        logged = intended * float(rng.choice([1 / 16, 1 / 8, 1 / 4, 1 / 2, 2.0, 4.0, 1 / math.sqrt(8)]))
    elif bug == "per_microbatch":
        logged = np.array([sched(k * s) for s in range(n)])
    elif bug == "no_warmup":
        logged = np.array([sched(s, w=0) for s in range(n)])
    else:
        while True:
            t0b = int(rng.integers(max(5, t0 // 2), 2 * t0))
            mb = int(rng.choice([1, 2]))
            if (t0b, mb) != (t0, t_mult) and t0b * k != t0 and _kit_sgdr_restarts(t0b, mb, n) != _kit_sgdr_restarts(t0, t_mult, n):
                break
        logged = np.array([sched(s, t0=t0b, t_mult=mb) for s in range(n)])
    logged = logged.astype(np.float32).astype(float)
    return {"logged": logged, "intended": intended, "grad_accum": k, "bug": bug, "family": family}
