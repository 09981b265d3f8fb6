"""Checks of 02's exercises (learning-rate schedules, batch-size scaling, the gradient noise scale,
learning-rate logs), kept here so that each test cell reads as a few lines of intent.

The visible checks compare a student's functions with torch's own schedulers (`torch_lr_trace`) or
with closed forms computed here from literals (no reference answer). The case generators draw a
hidden cell's inputs from the seed the cell gives them; the cell computes the expected values with
`solutions_lib.schedules` and wraps the student's calls in `no_delegation` itself (grader-side, that
check must run in the student's kernel: docs/GRADING.md).
"""
from __future__ import annotations

import importlib
import math

import numpy as np
import torch
from torch.optim import lr_scheduler as LR

from . import upstream
from .grading import expect_close, expect_equal, expect_true
from .batch_scaling import linear_regression_noise_scale, population_gradient_trace
from .schedules import simulate_lr_trace, torch_lr_trace


def forbidden(*allowed) -> tuple:
    """What an answer of 02 may not call: the course's schedules and batch-scaling references,
    torch's lr_scheduler, and the course's upstream copies except `allowed`."""
    from . import schedules
    return (schedules, importlib.import_module("solutions_lib.batch_scaling"), LR) + upstream.forbidden_except(*allowed)


def compare(name, cases, got, expected, rtol=1e-9, atol=0.0, unit="") -> None:
    """expect_close per case, described as `name(case...)`."""
    for c, g, e in zip(cases, got, expected):
        expect_close(g, e, f"{name}{c}", rtol=rtol, atol=atol, unit=unit)


def _twin(values, make_scheduler, n, lr, what, hint="") -> None:
    expect_close(values, torch_lr_trace(make_scheduler, n, lr=lr), what, rtol=1e-9, hint=hint)


# ------------------------------------------------------------------------ the schedules (1-7)


def check_step_decay(step_decay) -> None:
    """40 steps against torch's StepLR(step_size=7, gamma=0.5)."""
    _twin([step_decay(s, 0.1, 7, 0.5) for s in range(40)], lambda opt: LR.StepLR(opt, step_size=7, gamma=0.5), 40, 0.1,
          "step_decay(s, 0.1, 7, 0.5) for s = 0..39 against torch StepLR")


def step_decay_cases(seed, n=40) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, 2000)), float(10 ** rng.uniform(-4, 0)), int(rng.integers(1, 300)), float(rng.uniform(0.05, 0.99)))
            for _ in range(n)]


def check_polynomial_decay(polynomial_decay) -> None:
    """40 steps against torch's PolynomialLR (past the end included), a floor, and the rate after the end."""
    _twin([polynomial_decay(s, 0.1, 25, 2.0) for s in range(40)], lambda opt: LR.PolynomialLR(opt, total_iters=25, power=2.0), 40, 0.1,
          "polynomial_decay(s, 0.1, 25, 2.0) for s = 0..39 against torch PolynomialLR",
          hint="After total_steps the rate stays at end_lr: use min(step, total_steps).")
    expect_close(polynomial_decay(50, 1e-3, 100, 1.0, 1e-4), 5.5e-4, "polynomial_decay(50, 1e-3, 100, 1.0, end_lr=1e-4)",
                 rtol=1e-9, hint="Decay the part above the floor: end_lr + (base_lr - end_lr) * (...)**power.")
    expect_close(polynomial_decay(500, 1e-3, 100, 2.0, 1e-5), 1e-5, "polynomial_decay after the end of the decay", rtol=1e-9)


def polynomial_decay_cases(seed, n=40) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, 1200)), float(10 ** rng.uniform(-4, -1)), int(rng.integers(1, 1000)), float(rng.choice([0.5, 1.0, 2.0, 3.0])), 0.0)
            if rng.random() < 0.3 else
            (int(rng.integers(0, 1200)), 1e-3, int(rng.integers(1, 1000)), float(rng.uniform(0.3, 4)), float(rng.uniform(0, 1e-3)))
            for _ in range(n)]


def check_steps_from_fraction(steps_from_fraction) -> None:
    """An int, rounding up, and not because of float noise (0.07 * 100 = 7.000000000000001)."""
    expect_equal(steps_from_fraction(12_000, 0.03), 360, "steps_from_fraction(12000, 0.03)",
                 hint="Return an int: math.ceil(...) gives one, np.ceil gives a float.")
    expect_equal(steps_from_fraction(100, 0.07), 7, "steps_from_fraction(100, 0.07)",
                 hint="0.07 * 100 = 7.000000000000001 in floating point: subtract a tiny tolerance before the ceiling.")
    expect_equal(steps_from_fraction(100, 0.55), 55, "steps_from_fraction(100, 0.55)",
                 hint="0.55 * 100 = 55.00000000000001 in floating point.")
    expect_equal(steps_from_fraction(9537, 0.01), 96, "steps_from_fraction(9537, 0.01), a fraction of a step rounds up")
    expect_equal(steps_from_fraction(10, 0.0), 0, "steps_from_fraction(10, 0.0)")


def steps_from_fraction_cases(seed, n=300) -> list[tuple]:
    """n random (total, fraction in thousandths), then the products that float noise pushes above a whole number."""
    rng = np.random.default_rng(seed)
    cases = [(int(rng.integers(1, 10 ** 6)), int(rng.integers(0, 1001)) / 1000) for _ in range(n)]
    return cases + [(t, f) for t in (10, 30, 70, 100, 300, 1000) for f in (0.1, 0.3, 0.7, 0.07, 0.03, 0.29)]


def check_sgdr(cosine_with_restarts) -> None:
    """300 steps against torch's CosineAnnealingWarmRestarts for three (t0, t_mult, floor), and a restart step."""
    for t0, m, floor in [(10, 2, 1e-4), (13, 1, 0.0), (7, 3, 0.01)]:
        _twin([cosine_with_restarts(s, 0.1, t0, m, floor) for s in range(300)],
              lambda opt: LR.CosineAnnealingWarmRestarts(opt, T_0=t0, T_mult=m, eta_min=floor), 300, 0.1,
              f"cosine_with_restarts(s, 0.1, t0={t0}, t_mult={m}, min_lr={floor}) for s = 0..299 against torch",
              hint="Each new cycle is t_mult times longer than the last; the cosine restarts at t = 0.")
    expect_close(cosine_with_restarts(30, 0.1, 10, 2), 0.1, "cosine_with_restarts at the restart step 30 (t0=10, t_mult=2)", rtol=1e-9)


def sgdr_cases(seed, n=60) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, 5000)), float(10 ** rng.uniform(-4, -1)), int(rng.integers(1, 200)), int(rng.integers(1, 4)),
             0.0 if rng.random() < 0.5 else float(10 ** rng.uniform(-7, -5))) for _ in range(n)]


def sgdr_restart_cases(seed, n=50) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(1, 300)), int(rng.integers(1, 5)), int(rng.integers(1, 20000))) for _ in range(n)]


def check_one_cycle(one_cycle) -> None:
    """Three runs against torch's OneCycleLR (cos, two phases, no momentum cycling)."""
    for T, pct, div, final in [(1000, 0.3, 25.0, 1e4), (37, 0.25, 10.0, 100.0), (10, 0.25, 25.0, 1e4)]:
        _twin([one_cycle(s, 0.1, T, pct, div, final) for s in range(T)],
              lambda opt: LR.OneCycleLR(opt, 0.1, total_steps=T, pct_start=pct, anneal_strategy="cos", div_factor=div,
                                        final_div_factor=final, three_phase=False, cycle_momentum=False), T, 0.1,
              f"one_cycle over {T} steps (pct_start={pct}) against torch OneCycleLR",
              hint="Keep e = pct_start * T - 1 as a float; do not round it.")


def one_cycle_cases(seed, n=60) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(lambda T: (int(rng.integers(0, T)), float(10 ** rng.uniform(-4, 0)), T, float(rng.uniform(2.0 / T, 0.9)),
                        float(rng.uniform(2, 50)), float(10 ** rng.uniform(0, 4))))(int(rng.integers(5, 3000))) for _ in range(n)]


def inverse_sqrt_cases(seed, n=40) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, 200000)), int(rng.choice([64, 256, 512, 1024, 4096])), int(rng.integers(1, 20000))) for _ in range(n)]


def check_wsd(wsd, tokens_before_cooldown) -> None:
    """The example of task 2, 100 steps against torch's SequentialLR(LinearLR, ConstantLR, LinearLR),
    and the 1 - sqrt cooldown at hand-computed steps."""
    expect_equal(int(tokens_before_cooldown(50_000, 0.2, 512 * 2048)), 40_000 * 512 * 2048,
                 "tokens_before_cooldown(50_000, 0.2, 512 * 2048), the example of task 2",
                 hint="The cooldown takes the last 10,000 steps, so 40,000 steps of 1,048,576 tokens come before it.")
    W, T, frac, m = 5, 100, 0.2, 0.1
    D = 20
    _twin([wsd(s, 1.0, W, T, frac, m) for s in range(T)],
          lambda opt: LR.SequentialLR(opt, [LR.LinearLR(opt, 1 / W, 1.0, total_iters=W - 1), LR.ConstantLR(opt, factor=1.0, total_iters=1),
                                            LR.LinearLR(opt, 1 - (1 - m) / D, m, total_iters=D - 1)], milestones=[W, T - D]), T, 1.0,
          "wsd linear (W=5, T=100, 20% cooldown, floor 0.1) against torch SequentialLR(LinearLR, ConstantLR, LinearLR)",
          hint="The first cooldown step is already below the peak: x = (step - S + 1) / D.")
    expect_close(wsd(80, 2e-3, 50, 1000, 0.2, 0.0, "sqrt"), 2e-3, "wsd sqrt at step 80 (stable phase)", rtol=1e-9)
    expect_close(wsd(849, 2e-3, 50, 1000, 0.2, 2e-4, "sqrt"), 2e-4 + 1.8e-3 * (1 - math.sqrt(50 / 200)),
                 "wsd sqrt at step 849 (a quarter into the cooldown)", rtol=1e-9, hint="f(x) = 1 - sqrt(x) for the 'sqrt' shape.")
    expect_close(wsd(999, 2e-3, 50, 1000, 0.2, 2e-4, "sqrt"), 2e-4, "wsd at the last step", rtol=1e-9)
    expect_close(wsd(5000, 2e-3, 50, 1000, 0.2, 2e-4), 2e-4, "wsd past the end of the run", rtol=1e-9)


def wsd_cases(seed, n=80, n_tokens=40) -> tuple[list[tuple], list[tuple]]:
    """(wsd cases, tokens_before_cooldown cases): runs of 2-5000 steps whose warm-up and cooldown fit,
    steps up to 20 past the end, both shapes, floors of 0 or 0.1 x peak."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        T = int(rng.integers(2, 5000))
        frac = int(rng.integers(0, 60)) / 100
        D = math.ceil(frac * T - 1e-9 * max(1.0, frac * T))     # cooldown steps, as steps_from_fraction counts them
        W = int(rng.integers(0, T - D + 1))
        peak = float(10 ** rng.uniform(-5, -2))
        cases.append((int(rng.integers(0, T + 20)), peak, W, T, frac, float(peak * rng.choice([0.0, 0.1])), str(rng.choice(["linear", "sqrt"]))))
    tcases = [(int(rng.integers(1, 10 ** 6)), int(rng.integers(0, 60)) / 100, int(rng.integers(1, 2 ** 23))) for _ in range(n_tokens)]
    return cases, tcases


# --------------------------------------------------------------------- batch size (8-10, CH26-15)


def scale_lr_cases(seed, n=40) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(float(10 ** rng.uniform(-5, -1)), int(rng.integers(1, 5000)), int(rng.integers(1, 100000)), str(rng.choice(['linear', 'sqrt'])))
            for _ in range(n)]


def check_token_budget(fit_schedule_to_budget) -> None:
    """The plan of task 2 and an exact fit."""
    expect_equal(dict(fit_schedule_to_budget(20 * 10 ** 9, 1024 * 2048)),
                 {"total_steps": 9537, "warmup_steps": 96, "decay_steps": 1908, "cooldown_start": 7629, "tokens_trained": 9537 * 2_097_152},
                 "the plan of task 2 (20e9 tokens, 2,097,152 tokens/step)",
                 hint="20e9 / 2,097,152 = 9536.7, so 9537 steps; fractions of a step round up.")
    expect_equal(fit_schedule_to_budget(4096, 1024)["total_steps"], 4, "fit_schedule_to_budget(4096, 1024): an exact fit",
                 hint="No extra step when the budget divides evenly.")


def token_budget_cases(seed, n=60) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(10 ** 6, 10 ** 13)), int(rng.integers(1, 2 ** 24)), int(rng.integers(0, 6)) / 100,
             int(rng.integers(5, 30)) / 100) for _ in range(n)]


def compare_plans(cases, got, expected) -> None:
    for c, g, e in zip(cases, got, expected):
        expect_equal({k: int(v) for k, v in dict(g).items()}, e, f"fit_schedule_to_budget{c}",
                     hint="Use whole-number ceiling division for total_steps.")


#: The exercise's pretraining problem (task 11).
PRETRAINING_PROBLEM = {"token_budget": 20 * 10 ** 9, "seq_len": 2048, "n_gpus": 64, "max_micro_batch": 8,
                       "max_batch_tokens": 4 * 2 ** 20, "ref_lr": 3e-4, "ref_batch": 256}


def design_and_trace(design_pretraining_schedule, problem) -> tuple:
    """(the design for `problem`, its lr_at(s) for every step as a list, or None when it cannot be read)."""
    d = design_pretraining_schedule(dict(problem))
    try:
        n = int(d["total_steps"])
        trace = [float(d["lr_at"](s)) for s in range(n)] if 0 < n <= 2_000_000 else None
    except Exception:  # noqa: BLE001  (the checker reports a broken design in words)
        trace = None
    return d, trace


def check_design(design, trace, problem, checker, label="the fresh problem") -> None:
    """No rule of `checker` (schedules.check_pretraining_design) broken; the design's lr_at is read
    from `trace`, the rates recorded while the answer ran."""
    if isinstance(design, dict) and trace is not None:
        design = {**design, "lr_at": trace.__getitem__}
    problems = checker(design, problem)
    expect_true(not problems, f"Your design for {label} {problem} breaks these rules:\n- " + "\n- ".join(problems))


def check_scaling_table(linear_scaling_table) -> None:
    """The three rows of CH26-15."""
    table = linear_scaling_table([(256, 1e-3, 4096), (64, 5e-4, 2048), (512, 3e-4, 32768)])
    expect_equal(len(table), 3, "number of rows of the CH26-15 table")
    expect_close([lr for lr, _ in table], [0.016, 0.016, 0.0192], "scaled learning rates of the CH26-15 table",
                 rtol=1e-9, hint="Linear rule: base_lr * target_batch / base_batch.")
    expect_equal([bool(flag) for _, flag in table], [True, True, True], "which rows exceed 0.01",
                 hint="All three rows exceed 0.01, not only the third.")


def scaling_table_cases(seed, n=30) -> tuple[list[tuple], float]:
    """(rows, limit): n rows (base batch, base lr, target batch) and one limit."""
    rng = np.random.default_rng(seed)
    rows = [(int(rng.integers(16, 2048)), float(10 ** rng.uniform(-5, -2.5)), int(rng.integers(16, 65536))) for _ in range(n)]
    return rows, float(10 ** rng.uniform(-3, -1.5))


def compare_table(rows, limit, got, expected) -> None:
    expect_equal(len(got), len(rows), "rows returned by linear_scaling_table")
    for i, r in enumerate(rows):
        (g_lr, g_flag), (e_lr, e_flag) = got[i], expected[i]
        expect_close(g_lr, e_lr, f"scaled lr of row {r}", rtol=1e-9)
        expect_equal(bool(g_flag), e_flag, f"exceeds-limit flag of row {r} (limit {limit:.3g})")


# ------------------------------------------------------------------- the gradient noise scale (11-13)


def check_noise_scale(two_batch_noise_scale, exact_b_simple) -> None:
    """Exact measurements E|G_B|^2 = 2.5 + 40/B at B = 8 and 128, and B_simple of a tiny regression."""
    g2, trace, b_simple = two_batch_noise_scale([2.5 + 40 / 8] * 3, [2.5 + 40 / 128] * 3, 8, 128)
    expect_close(g2, 2.5, "|G|^2 from exact E|G_B|^2 = 2.5 + 40/B at B = 8 and 128", rtol=1e-9,
                 hint="|G|^2 = (b_big |G_big|^2 - b_small |G_small|^2) / (b_big - b_small).")
    expect_close(trace, 40.0, "tr(Sigma) from the same measurements", rtol=1e-9,
                 hint="tr(Sigma) = (|G_small|^2 - |G_big|^2) / (1/b_small - 1/b_big).")
    expect_close(b_simple, 16.0, "B_simple = tr(Sigma) / |G|^2", rtol=1e-9)
    expect_close(exact_b_simple(np.array([1.0, 1.0, 0.0, 0.0]), np.zeros(4), 2.0), 4 * (1 + 4 / 2) + 1,
                 "exact_b_simple with d=4, |delta|^2=2, noise_std=2", rtol=1e-9,
                 hint="B_simple = d (1 + sigma^2/|delta|^2) + 1.")


def noise_scale_cases(seed, n=30, n_exact=20) -> tuple[list[tuple], list[tuple]]:
    """(two-batch cases: noisy measurements of |G|^2 + tr/B at two sizes, exact_b_simple cases)."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        bs = int(rng.integers(1, 64))
        bb = bs + int(rng.integers(1, 4096))
        g2_true, tr_true = float(rng.uniform(0.1, 10)), float(rng.uniform(1, 500))
        k = int(rng.integers(1, 6))
        small = list(g2_true + tr_true / bs + rng.normal(0, 0.01, k))
        big = list(g2_true + tr_true / bb + rng.normal(0, 0.001, k))
        cases.append((small, big, bs, bb))
    ecases = [(rng.normal(size=d), rng.normal(size=d), float(rng.uniform(0, 3))) for d in rng.integers(1, 50, n_exact)]
    return cases, ecases


def compare_noise_scale(cases, got, expected, ecases, egot, eexpected) -> None:
    for c, g, (e_g2, e_tr) in zip(cases, got, expected):
        expect_close(g[0], e_g2, f"|G|^2 estimate for b_small={c[2]}, b_big={c[3]}", rtol=1e-7,
                     hint="Average the measurements of each size before combining them.")
        expect_close(g[1], e_tr, f"tr(Sigma) estimate for b_small={c[2]}, b_big={c[3]}", rtol=1e-7)
        expect_close(g[2], e_tr / e_g2, f"B_simple estimate for b_small={c[2]}, b_big={c[3]}", rtol=1e-7)
    for c, g, e in zip(ecases, egot, eexpected):
        expect_close(g, e, f"exact_b_simple for d={c[0].size}, noise_std={c[2]:.3g}", rtol=1e-9)


def noise_problem(d, distance, noise_std, seed):
    """A linear regression at distance ~`distance` from its optimum: (its exact B_simple, the
    closed form d (1 + sigma^2 / |w - w*|^2) + 1, and grad_of_batch(B): the mean gradient of B fresh examples)."""
    gen = torch.Generator().manual_seed(seed)
    w_star = torch.randn(d, generator=gen, dtype=torch.float64)
    w = w_star + distance * torch.randn(d, generator=gen, dtype=torch.float64) / math.sqrt(d)

    def grad_of_batch(batch):
        x = torch.randn(batch, d, generator=gen, dtype=torch.float64)
        y = x @ w_star + noise_std * torch.randn(batch, generator=gen, dtype=torch.float64)
        w_var = w.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(0.5 * ((x @ w_var - y) ** 2).mean(), w_var)
        return g

    return linear_regression_noise_scale(w.numpy(), w_star.numpy(), noise_std), grad_of_batch


def per_gpu_batch_cases(seed, n=40) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(64, 20000)), int(rng.integers(1, 300)), int(rng.integers(1, 64))) for _ in range(n)]


# ------------------------------------------------------------------------ the variance law (14)


def check_variance_law(minibatch_variance, loglog_slope, variance_slope) -> None:
    """B * Var at four B on a fixed population against its tr(Sigma), the slope of an
    exact 1/x law, and the notebook's measured slope."""
    pop = np.random.default_rng(5).standard_normal((2000, 8)) * np.linspace(0.5, 3.0, 8) + 1.0
    trace = population_gradient_trace(pop)
    for b in [1, 4, 16, 64]:
        v = minibatch_variance(pop, b, 3000, np.random.default_rng(b))
        expect_close(v * b, trace, f"B * minibatch_variance at B={b} (should be tr(Sigma) = {trace:.3f})", rtol=0.1,
                     hint="Average |batch mean - population mean|^2 over draws; rows drawn with replacement.")
    expect_close(loglog_slope([1, 10, 100], [3.0, 0.3, 0.03]), -1.0, "loglog_slope of an exact 1/x law", rtol=1e-9)
    expect_close(variance_slope, -1.0, "variance_slope of the notebook's measurement", rtol=0, atol=0.1,
                 hint="Var(g_B) = tr(Sigma)/B is a line of slope -1 on log-log axes.")


def variance_cases(seed) -> tuple[list, list, list, np.ndarray]:
    """(3 populations, 10 x-series, their power-law y-series with noise, a 40-row population)."""
    rng = np.random.default_rng(seed)
    pops = [rng.standard_normal((int(rng.integers(500, 3000)), int(rng.integers(2, 20)))) * float(rng.uniform(0.1, 5)) + 2.0
            for _ in range(3)]
    xs = [np.sort(rng.uniform(1, 1000, 6)) for _ in range(10)]
    ys = [float(rng.uniform(0.1, 10)) * x ** float(rng.uniform(-2, 1)) * np.exp(rng.normal(0, 0.1, 6)) for x in xs]
    small_pop = rng.standard_normal((40, 5)) * 2.0 + 1.0
    return pops, xs, ys, small_pop


# ------------------------------------------------------------------------ learning-rate logs (15)

BUGS = ("ok", "not_scaled", "per_microbatch", "no_warmup", "wrong_restart")


def check_plotted_traces(diagnose_lr_trace) -> None:
    """The five plotted examples (simulate_lr_trace with seed 7)."""
    for bug in BUGS:
        tr = simulate_lr_trace(np.random.default_rng(7), bug)
        got = diagnose_lr_trace(tr["logged"].copy(), tr["intended"].copy(), tr["grad_accum"])
        expect_equal(got, bug, f"diagnose_lr_trace on the plotted '{bug}' example",
                     hint="Check the labels in the order of the table; compare with a relative tolerance.")


def buggy_traces(seed, per_bug=8) -> list[dict]:
    """per_bug fresh traces of each of the four bugs, shuffled."""
    rng = np.random.default_rng(seed)
    traces = [simulate_lr_trace(rng, bug) for bug in BUGS[1:] for _ in range(per_bug)]
    order = rng.permutation(len(traces))
    return [traces[i] for i in order]


def clean_traces(seed, n=15) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [simulate_lr_trace(rng, "ok") for _ in range(n)]


def diagnose_all(diagnose_lr_trace, traces) -> list:
    return [diagnose_lr_trace(t["logged"].copy(), t["intended"].copy(), t["grad_accum"]) for t in traces]


def sgdr_trace(t0, n=200) -> np.ndarray:
    """Cosine restarts every t0 steps (t_mult = 1) from 1e-3, written out."""
    return np.array([1e-3 * 0.5 * (1 + math.cos(math.pi * (s % t0) / t0)) for s in range(n)])


def check_clean_traces(diagnose_lr_trace) -> None:
    """A clean warm-up stored as float32 is 'ok'; a trace that wobbles around the plan is 'unknown'."""
    intended = np.array([min(1.0, (s + 1) / 20) * 1e-3 for s in range(200)])
    expect_equal(diagnose_lr_trace(intended.astype(np.float32), intended, 4), "ok",
                 "diagnose_lr_trace on a clean trace stored as float32",
                 hint="Logs are float32: compare with a relative tolerance (~1e-4), not exact equality.")
    wobbly = intended * (1 + 0.2 * np.sin(np.arange(200) / 10))
    expect_equal(diagnose_lr_trace(wobbly, intended, 1), "unknown", "diagnose_lr_trace on a trace that wobbles around the plan",
                 hint="Return 'unknown' when no signature of the table fits.")
