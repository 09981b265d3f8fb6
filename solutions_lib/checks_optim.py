"""Checks of 01's exercises (AdamW, global-norm clipping, LAMB, the LAMB-vs-AdamW experiment, AdamW's
parameter groups), kept here so that each test cell reads as a few lines of intent.

Every check compares the student's code with an oracle computed here from torch's own optimizers or
closed forms (no reference answer), or with the expected values the test cell passes in. The case
generators draw a hidden cell's inputs from the seed the cell gives them; the cell computes their
expected values with `solutions_lib.optim` and wraps the student's calls in `no_delegation` itself
(grader-side, that check must run in the student's kernel: docs/GRADING.md).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .grading import expect_close, expect_equal, expect_true

# --------------------------------------------------------------------------------------------- AdamW


def check_adamw_seed(adamw_step) -> None:
    """The text's seed example: theta = 2, g = 0.5, lr = 1e-3, wd = 0.01, first step, on plain floats."""
    th, m, v = adamw_step(2.0, 0.5, 0.0, 0.0, step=1, lr=1e-3, weight_decay=0.01)
    expect_true(all(isinstance(x, float) for x in (th, m, v)),
                f"adamw_step on plain numbers must return three Python floats, got {(type(th).__name__, type(m).__name__, type(v).__name__)}")
    expect_close(th, 2.0 * (1 - 1e-3 * 0.01) - 1e-3 * 0.5 / (0.5 + 1e-8), "theta after one step (theta=2, g=0.5, lr=1e-3, wd=0.01)",
                 rtol=1e-12, hint="Decay by (1 - lr*wd) and subtract lr*m_hat/(sqrt(v_hat)+eps); expected about 1.99898.")
    expect_close(m, 0.05, "raw m after one step", rtol=1e-12, hint="Return m, not m_hat.")
    expect_close(v, 0.00025, "raw v after one step", rtol=1e-12, hint="Return v, not v_hat.")


def adamw_cases(seed, n=15) -> list[tuple[tuple, dict]]:
    """n random scalar cases (args, kwargs) of adamw_step: any step, betas, eps and weight decay."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        args = (float(rng.normal()), float(rng.normal() * 3), float(rng.normal() * 0.1), float(rng.uniform(0, 0.5)),
                int(rng.integers(1, 50)), float(10 ** rng.uniform(-4, -1)))
        kw = dict(betas=(float(rng.uniform(0, 0.99)), float(rng.uniform(0.9, 0.9999))), eps=float(10 ** rng.uniform(-9, -4)),
                  weight_decay=float(rng.uniform(0, 0.2)))
        cases.append((args, kw))
    return cases


def compare_adamw_cases(cases, got, expected) -> None:
    """(param, m, v) of each scalar case against the expected triple."""
    for (a, kw), r, (e_param, e_m, e_v) in zip(cases, got, expected):
        what = f"param={a[0]:.4g}, grad={a[1]:.4g}, m={a[2]:.3g}, v={a[3]:.3g}, step={a[4]}, lr={a[5]:.3g}, {kw}"
        expect_close(list(r), [e_param, e_m, e_v], f"(param, m, v) for {what}", rtol=1e-10, atol=1e-14,
                     hint="Use the given m, v and step (bias corrections use beta**step), and the betas/eps/weight_decay arguments.")


def check_adamw_vs_torch(adamw_step, seed=0, steps=3) -> None:
    """Three steps on (3, 2) arrays side by side with torch.optim.AdamW (lr 1e-2, betas (0.9, 0.99), wd 0.1)."""
    rng = np.random.default_rng(seed)
    p0 = rng.normal(size=(3, 2))
    tp = torch.tensor(p0, requires_grad=True)
    opt = torch.optim.AdamW([tp], lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    p, m, v = p0.copy(), np.zeros((3, 2)), np.zeros((3, 2))
    for t in range(1, steps + 1):
        g = rng.normal(size=(3, 2))
        tp.grad = torch.tensor(g)
        opt.step()
        p, m, v = adamw_step(p, g, m, v, t, 1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
        expect_true(isinstance(p, np.ndarray) and p.shape == (3, 2), f"for (3, 2) arrays adamw_step must return (3, 2) arrays, got {type(p).__name__}")
        expect_close(p, tp.detach().numpy(), f"param after step {t} vs torch.optim.AdamW", rtol=1e-10, atol=1e-12)
        expect_close(m, opt.state[tp]["exp_avg"].numpy(), f"m after step {t} vs torch's exp_avg", rtol=1e-10, atol=1e-12)
        expect_close(v, opt.state[tp]["exp_avg_sq"].numpy(), f"v after step {t} vs torch's exp_avg_sq", rtol=1e-10, atol=1e-14)


#: The hyperparameters of the hidden 30-step trajectories: defaults, a strong decay, beta1 = 0.
ADAMW_TRAJECTORY_HPS = (dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),
                        dict(lr=3e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.2),
                        dict(lr=0.1, betas=(0.0, 0.5), eps=1e-3, weight_decay=0.0))


def adamw_trajectory_cases(seed, hps=ADAMW_TRAJECTORY_HPS, shape=(4, 3), steps=30) -> list[tuple[dict, np.ndarray, list]]:
    """(hyperparameters, initial param, gradients) per trajectory; the gradients' scales vary by 1e4."""
    rng = np.random.default_rng(seed)
    out = []
    for hp in hps:
        p0 = rng.normal(size=shape)
        grads = [rng.normal(size=shape) * rng.choice([1e-3, 1.0, 20.0]) for _ in range(steps)]
        out.append((hp, p0, grads))
    return out


def adamw_trajectory(adamw_step, p0, grads, hp, check_inputs=False) -> list[tuple]:
    """(param, m, v) after each step of `adamw_step` from p0 with zero moments; with check_inputs,
    also checks after each call that the step left its input arrays as they were."""
    out, (p, m, v) = [], (np.array(p0, copy=True), np.zeros(np.shape(p0)), np.zeros(np.shape(p0)))
    for t, g in enumerate(grads, start=1):
        inputs = (p, g, m, v)
        copies = [np.array(x, copy=True) for x in inputs]
        p, m, v = adamw_step(p, g, m, v, t, **hp)
        if check_inputs:
            for x, c in zip(inputs, copies):
                expect_true(np.array_equal(x, c), "adamw_step modified one of its input arrays; compute new arrays instead.")
        out.append((np.array(p), np.array(m), np.array(v)))
    return out


def torch_adamw_params(p0, grads, hp) -> list[np.ndarray]:
    """The parameter after each step of torch.optim.AdamW on the same gradients (the oracle)."""
    tp = torch.tensor(p0, requires_grad=True)
    opt = torch.optim.AdamW([tp], **hp)
    out = []
    for g in grads:
        tp.grad = torch.tensor(g)
        opt.step()
        out.append(tp.detach().numpy().copy())
    return out


def compare_adamw_trajectory(got, expected, torch_params, hp) -> None:
    """Each step's (param, m, v) against the expected trajectory, and the param against torch's AdamW."""
    n = len(expected)
    for k in range(n):
        expect_close(got[k][0], expected[k][0], f"param after step {k + 1} of {n} ({hp})", rtol=1e-9, atol=1e-12,
                     hint="Decay first with the old param, then the Adam step with bias corrections using beta**step.")
        expect_close(got[k][1], expected[k][1], f"m after step {k + 1} of {n} ({hp})", rtol=1e-9, atol=1e-12)
        expect_close(got[k][2], expected[k][2], f"v after step {k + 1} of {n} ({hp})", rtol=1e-9, atol=1e-12)
        expect_close(got[k][0], torch_params[k], f"param after step {k + 1} of {n} vs torch.optim.AdamW ({hp})", rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------------------------------ clipping


def clip_cases(seed, n=24) -> list[tuple[list, float, float]]:
    """(grads, max_norm, norm_type): 1-5 arrays of random shapes and scales, 2-norm and inf-norm in
    turn, max_norm at 0.1, 0.7, 1.5 and 10 times the total norm (above and below the threshold)."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n):
        gs = [rng.normal(size=tuple(rng.integers(1, 5, size=rng.integers(1, 4)))) * 10 ** rng.uniform(-2, 1)
              for _ in range(rng.integers(1, 6))]
        p = [2.0, float("inf")][i % 2]
        flat = np.concatenate([g.ravel() for g in gs])
        tot = float(np.abs(flat).max() if p == float("inf") else np.sqrt((flat ** 2).sum()))
        cases.append((gs, tot * [0.1, 0.7, 1.5, 10.0][i % 4], p))
    return cases


def torch_clip(gs, max_norm, norm_type) -> tuple[list[np.ndarray], float]:
    """(clipped arrays, total norm) from torch.nn.utils.clip_grad_norm_ (the oracle)."""
    ps = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in gs]
    for q, g in zip(ps, gs):
        q.grad = torch.tensor(g)
    tot = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    return [q.grad.numpy() for q in ps], float(tot)


def check_clip_case(clip_grad_norm, gs, max_norm, norm_type, expected, torch_expected=None, guard=None) -> None:
    """One case: the inputs left unmodified, a list back, the total norm and every clipped array
    against `expected` = (clipped, total) and, when given, torch's (clipped, total). `guard()` (the
    cell's no_delegation) wraps the student's call."""
    before = [g.copy() for g in gs]
    if guard is None:
        rc, rt = clip_grad_norm(gs, max_norm, norm_type=norm_type)
    else:
        with guard():
            rc, rt = clip_grad_norm(gs, max_norm, norm_type=norm_type)
    ec, et = expected
    what = f"{len(gs)} arrays of shapes {[g.shape for g in gs]}, max_norm={max_norm:.4g}, norm_type={norm_type}"
    expect_true(all(np.array_equal(a, b) for a, b in zip(gs, before)),
                f"clip_grad_norm modified its input arrays ({what}); return new arrays instead.")
    expect_true(isinstance(rc, list) and len(rc) == len(gs), f"clipped must be a list of {len(gs)} arrays ({what})")
    expect_close(rt, et, f"total norm ({what})", rtol=1e-10, atol=1e-12,
                 hint="Total norm over all arrays; for norm_type=inf the largest absolute entry.")
    for k in range(len(gs)):
        expect_close(rc[k], ec[k], f"clipped array {k} ({what})", rtol=1e-10, atol=1e-14,
                     hint="One coefficient min(1, max_norm/(total + 1e-6)) for every array.")
    if torch_expected is not None:
        expect_close(rt, torch_expected[1], f"total norm vs torch.nn.utils.clip_grad_norm_ ({what})", rtol=1e-10)
        for k, (a, b) in enumerate(zip(rc, torch_expected[0])):
            expect_close(a, b, f"clipped array {k} vs torch.nn.utils.clip_grad_norm_ ({what})", rtol=1e-10, atol=1e-14)


# ---------------------------------------------------------------------------------------------- LAMB


def lamb_run(make_optimizer, init, grads) -> list[list[torch.Tensor]]:
    """Fresh float64 leaf tensors from `init` (a list of tensors), the optimizer
    `make_optimizer(params)`, one step per entry of `grads` (a list of per-tensor gradients, or of
    flat lists for one tensor); the tensors after each step."""
    ps = [torch.as_tensor(x, dtype=torch.float64).clone().requires_grad_(True) for x in init]
    opt = make_optimizer(ps)
    out = []
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = torch.as_tensor(g, dtype=torch.float64).clone()
        opt.step()
        out.append([p.detach().clone() for p in ps])
    return out


def check_lamb_hand(Lamb) -> None:
    """The text's example: w = [3, 4], g = [0.5, -2], lr = 0.1, wd = 0, eps = 0."""
    w = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    opt = Lamb([w], lr=0.1, betas=(0.9, 0.999), eps=0.0, weight_decay=0.0)
    w.grad = torch.tensor([0.5, -2.0], dtype=torch.float64)
    opt.step()
    d = 0.1 * 5 / math.sqrt(2)
    expect_close(w.detach(), [3 - d, 4 + d], "w after one LAMB step (w=[3,4], g=[0.5,-2], lr=0.1, wd=0, eps=0)", rtol=1e-12,
                 hint="u = m_hat/(sqrt(v_hat)+eps) = [1, -1] at step 1; r = ||w||/||u|| = 5/sqrt(2); w -= lr*r*u.")


def check_lamb_vs_adamw_oracle(Lamb, seed=7, steps=3, lr=0.05, wd=0.1) -> None:
    """Two tensors, `steps` steps, against an oracle built from torch's AdamW: a copy at w stepped
    with lr = 1 lands on w (1 - wd) - adam_dir, so u = w - w_after, and LAMB gives
    w - lr ||w|| / ||u|| u."""
    torch.manual_seed(seed)
    shapes = [(5, 3), (5,)]
    ps = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    opt = Lamb(ps, lr=lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=wd)
    shadow = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    sopt = [torch.optim.AdamW([q], lr=1.0, betas=(0.9, 0.999), eps=1e-6, weight_decay=wd) for q in shadow]
    for step in range(1, steps + 1):
        grads = [torch.randn(s, dtype=torch.float64) for s in shapes]
        expected = []
        for p, q, o, g in zip(ps, shadow, sopt, grads):
            with torch.no_grad():
                q.copy_(p)
            q.grad = g.clone()
            o.step()
            u = p.detach() - q.detach()
            expected.append(p.detach() - lr * (p.detach().norm() / u.norm()) * u)
            p.grad = g.clone()
        opt.step()
        for k, (p, e) in enumerate(zip(ps, expected)):
            expect_close(p.detach(), e, f"parameter {k} (shape {tuple(p.shape)}) after LAMB step {step}", rtol=1e-10, atol=1e-12,
                         hint="One trust ratio per tensor; u includes wd*w; bias corrections with beta**t.")


#: The hidden LAMB configurations: defaults, a large lr with strong decay, beta1 = 0 without decay.
LAMB_CONFIGS = (dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01),
                dict(lr=0.2, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.3),
                dict(lr=3e-3, betas=(0.0, 0.5), eps=1e-4, weight_decay=0.0))
LAMB_SHAPES = ((8, 6), (8,), (4, 8), (4,), (2, 3, 4))


def lamb_group_cases(seed, configs=LAMB_CONFIGS, shapes=LAMB_SHAPES, steps=6) -> list[tuple[dict, list, list]]:
    """(config, initial tensors, gradients per step) per config; tensors of norms 0-3 x N(0, 1) and
    gradients whose scales span 1e-2..1e2."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for cfg in configs:
        init = [torch.randn(s, dtype=torch.float64, generator=gen) * float(torch.rand(1, generator=gen) * 3) for s in shapes]
        grads = [[torch.randn(s, dtype=torch.float64, generator=gen) * 10 ** float(torch.rand(1, generator=gen) * 4 - 2) for s in shapes]
                 for _ in range(steps)]
        out.append((cfg, init, grads))
    return out


def two_groups(Lamb, cfg, split=3):
    """A factory: Lamb over two parameter groups, the tensors from `split` on with 3 x the lr."""
    return lambda ps: Lamb([{"params": ps[:split]}, {"params": ps[split:], "lr": cfg["lr"] * 3}], **cfg)


def compare_lamb_runs(got, expected, cfg, shapes=LAMB_SHAPES, split=3) -> None:
    """Every tensor after every step against the expected run (two groups, the second at 3 x lr)."""
    for t in range(len(expected)):
        for k in range(len(shapes)):
            expect_close(got[t][k], expected[t][k], f"parameter {k} (shape {shapes[k]}) after step {t + 1} of {len(expected)}, {cfg}"
                         f"{' (group 2: lr x3)' if k >= split else ''}", rtol=1e-9, atol=1e-12,
                         hint="Read lr/betas/eps/weight_decay from each param group; one trust ratio per tensor.")


def check_lamb_zero_weight(Lamb) -> None:
    """A zero-initialised tensor (||w|| = 0) must move: r = 1."""
    z = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = Lamb([z], lr=0.1, betas=(0.9, 0.999), eps=0.0, weight_decay=0.5)
    z.grad = torch.tensor([2.0, -0.5, 1e-3], dtype=torch.float64)
    opt.step()
    expect_close(z.detach(), [-0.1, 0.1, -0.1], "a zero-initialised tensor after one step (||w|| = 0)", rtol=1e-12,
                 hint="||w|| = 0 makes ||w||/||u|| = 0: use r = 1 instead, so the tensor can leave zero.")


def lamb_edge_runs(Lamb) -> tuple[torch.Tensor, torch.Tensor]:
    """The tensors after the two edge steps: ||u|| = 0 (zero gradient, no decay: w stays at 1), and a
    parameter whose .grad is None next to one that has a gradient (it stays at 1)."""
    v = torch.ones(4, dtype=torch.float64, requires_grad=True)
    ov = Lamb([v], lr=0.1, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0)
    v.grad = torch.zeros(4, dtype=torch.float64)
    ov.step()
    a = torch.ones(2, dtype=torch.float64, requires_grad=True)
    b = torch.ones(2, dtype=torch.float64, requires_grad=True)
    oab = Lamb([a, b], lr=0.1, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.1)
    a.grad = torch.ones(2, dtype=torch.float64)
    oab.step()
    return v, b


def check_lamb_edges(v, b) -> None:
    """The outcome of `lamb_edge_runs`: both tensors untouched."""
    expect_close(v.detach(), torch.ones(4, dtype=torch.float64), "w after a zero gradient with weight_decay=0 (||u|| = 0)", rtol=0,
                 hint="||u|| = 0: use r = 1 (the step lr*r*u is then zero) instead of dividing by zero (nan).")
    expect_close(b.detach(), torch.ones(2, dtype=torch.float64), "a parameter whose .grad is None", rtol=0,
                 hint="Skip parameters without a gradient (p.grad is None), as torch's optimizers do.")


# ------------------------------------------------------------------- the experiment (beside cells)

#: (BASE_LR, eps) per optimizer as the text of Part 4 prescribes; BASE_BATCH = 256, weight decay
#: 0.01, warm-up over the first 25 % of the updates.
PRESCRIBED = {"adamw": (1e-3, 1e-8), "lamb": (2e-3, 1e-6)}


def recorded_run(run_comparison, namespace, batch_sizes, epochs, seed, n_samples, layer_scale=None):
    """Run the student's run_comparison with the course's Lamb swapped in for theirs (Part 3 grades
    it), recording with an optimizer pre-step hook the (lr, weight_decay, eps) of every group at
    every update and the norms of the weights each optimizer first steps. Returns (what
    run_comparison returned, {(optimizer name, batch): {"steps": [...], "norms": [...]}})."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    from . import optim as lib_optim
    from .upstream import swapped

    log = []

    def pre_hook(opt, args, kwargs):
        first = not any(o is opt for o, _, _ in log)
        norms = [float(p.detach().norm()) for g in opt.param_groups for p in g["params"]] if first else None
        log.append((opt, [(g["lr"], g["weight_decay"], g["eps"]) for g in opt.param_groups], norms))

    hook = register_optimizer_step_pre_hook(pre_hook)
    try:
        with swapped(namespace, Lamb=lib_optim.Lamb):
            extra = {} if layer_scale is None else {"layer_scale": layer_scale}
            out = run_comparison(batch_sizes=batch_sizes, epochs=epochs, seed=seed, n_samples=n_samples, **extra)
    finally:
        hook.remove()
    runs = {}
    for opt, groups, norms in log:
        runs.setdefault(opt, {"steps": [], "norms": norms})["steps"].append(groups)
    by_key = {}
    for opt, run in runs.items():
        name = "lamb" if isinstance(opt, lib_optim.Lamb) else "adamw" if isinstance(opt, torch.optim.AdamW) else type(opt).__name__
        for b in batch_sizes:
            if len(run["steps"]) == epochs * math.ceil(n_samples / b):
                by_key[(name, b)] = run
    return out, by_key


def oracle_curves(namespace, batch_sizes, epochs, seed, n_samples, layer_scale=None) -> dict:
    """The protocol of the exercise text, run with torch's AdamW and the course's Lamb on the
    notebook's make_regression_data, make_mlp and full_loss (looked up in `namespace`)."""
    from . import optim as lib_optim

    make_regression_data, make_mlp, full_loss = (namespace[k] for k in ("make_regression_data", "make_mlp", "full_loss"))
    x, y = make_regression_data(n_samples, seed)
    curves = {}
    for name in ("adamw", "lamb"):
        base, eps = PRESCRIBED[name]
        for b in batch_sizes:
            model = make_mlp(seed, layer_scale)
            make = torch.optim.AdamW if name == "adamw" else lib_optim.Lamb
            peak = base * b / 256
            opt = make(model.parameters(), lr=peak, eps=eps, weight_decay=0.01)
            warmup = max(1, round(0.25 * epochs * math.ceil(n_samples / b)))
            gen, k, losses = torch.Generator().manual_seed(seed), 0, [full_loss(model, x, y)]
            for _ in range(epochs):
                order = torch.randperm(n_samples, generator=gen)
                for start in range(0, n_samples, b):
                    idx = order[start:start + b]
                    k += 1
                    for group in opt.param_groups:
                        group["lr"] = peak * min(1.0, k / warmup)
                    loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                losses.append(full_loss(model, x, y))
            curves[(name, b)] = losses
    return curves


def check_result_shape(out, batch_sizes, epochs, hidden=False) -> None:
    """The dict's keys (one per optimizer and batch size) and epochs + 1 losses per curve."""
    want = {(o, b) for o in ("adamw", "lamb") for b in batch_sizes}
    label = f"run_comparison(batch_sizes={tuple(batch_sizes)}, ...)"
    if hidden:
        expect_true(isinstance(out, dict) and set(out) == want,
                    f"{label} must return the keys {sorted(want)}, got {sorted(out) if isinstance(out, dict) else out!r:.80}. "
                    "Use the batch_sizes argument instead of fixed values.")
    else:
        expect_true(isinstance(out, dict) and set(out) == want,
                    f"{label} must return a dict with keys {sorted(want)}, "
                    f"got {sorted(out) if isinstance(out, dict) else type(out).__name__}")
    for key in sorted(want):
        if hidden:
            expect_equal(np.asarray(out[key], dtype=float).shape, (epochs + 1,), f"loss curve for {key} with epochs={epochs}",
                         hint="Use the epochs argument: epochs + 1 values.")
        else:
            expect_equal(np.asarray(out[key], dtype=float).shape, (epochs + 1,), f"shape of the loss curve for {key} with epochs={epochs}",
                         hint="epochs + 1 values: before training, then after each epoch.")


def check_settings(namespace, by_key, batch_sizes, epochs, seed, n_samples, label, layer_scale=None) -> None:
    """Per optimizer and batch size: the number of updates, the lr of every update (linear scaling
    and warm-up), weight decay and eps, and the norms of the weights the run started from."""
    make_mlp = namespace["make_mlp"]
    init_norms = [float(p.detach().norm()) for p in make_mlp(seed, layer_scale).parameters()]
    for name in ("adamw", "lamb"):
        base, eps = PRESCRIBED[name]
        for b in batch_sizes:
            n_updates = epochs * math.ceil(n_samples / b)
            warmup = max(1, round(0.25 * n_updates))
            want = [base * b / 256 * min(1.0, k / warmup) for k in range(1, n_updates + 1)]
            run = by_key.get((name, b), {"steps": [], "norms": []})
            steps = run["steps"]
            expect_equal(len(steps), n_updates, f"number of {name} updates at batch {b} ({label})",
                         hint=f"{epochs} epochs of ceil({n_samples}/{b}) updates, one optimizer step each.")
            expect_close([max(lr for lr, _, _ in g) for g in steps], want, f"lr of every {name} update at batch {b} ({label})",
                         rtol=1e-9, hint="Linear scaling: peak lr = BASE_LR[opt] * batch / BASE_BATCH (256), times "
                         "min(1, k / warmup_steps) at update k = 1, 2, ... with warmup_steps = max(1, round(0.25 * total_steps)).")
            expect_close([[wd, e] for g in steps[:1] for _, wd, e in g[:1]], [[0.01, eps]],
                         f"weight_decay and eps of {name} at batch {b} ({label})", rtol=1e-12,
                         hint="weight_decay = 0.01 for both; eps = 1e-8 for AdamW and 1e-6 for LAMB.")
            expect_close(run["norms"] or [], init_norms, f"norms of the initial weights of the {name} run at batch {b} ({label})",
                         rtol=1e-6, hint="Start every run from a fresh make_mlp(seed, layer_scale), with its layer scales.")


def check_curves(namespace, out, batch_sizes, epochs, seed, n_samples, label, layer_scale=None) -> None:
    """Every loss curve against the protocol run here (`oracle_curves`), within 1e-4."""
    oracle = oracle_curves(namespace, batch_sizes, epochs, seed, n_samples, layer_scale)
    for name in ("adamw", "lamb"):
        for b in batch_sizes:
            got = out.get((name, b)) if isinstance(out, dict) else None
            expect_close(np.asarray(got if got is not None else [], dtype=float), oracle[(name, b)],
                         f"loss curve of {name} at batch {b} ({label}) vs the protocol run in this cell", rtol=1e-4,
                         hint="Follow the protocol: make_regression_data(n_samples, seed), a fresh make_mlp(seed, layer_scale) and "
                         "torch.Generator().manual_seed(seed) per run, torch.randperm(n_samples, generator=gen) each epoch, "
                         "consecutive slices, lr set before each update, full_loss before training and after each epoch.")


def check_experiment(run_comparison, namespace, batch_sizes, epochs, seed, n_samples, label, layer_scale=None,
                     shape=False, hidden=False, guard=None) -> None:
    """One recorded run of run_comparison on a small problem (one thread), then its result's shape
    (with shape=True), its settings (described by `label`) and its curves (`label, seed=...`).
    `guard()` (the cell's no_delegation) wraps the recorded run."""
    torch.set_num_threads(1)
    try:
        if guard is None:
            out, runs = recorded_run(run_comparison, namespace, batch_sizes, epochs, seed, n_samples, layer_scale)
        else:
            with guard():
                out, runs = recorded_run(run_comparison, namespace, batch_sizes, epochs, seed, n_samples, layer_scale)
    finally:
        torch.set_num_threads(2)
    if shape:
        check_result_shape(out, batch_sizes, epochs, hidden=hidden)
    check_settings(namespace, runs, batch_sizes, epochs, seed, n_samples, label, layer_scale)
    torch.set_num_threads(1)
    try:
        check_curves(namespace, out, batch_sizes, epochs, seed, n_samples, f"{label}, seed={seed}", layer_scale)
    finally:
        torch.set_num_threads(2)


# --------------------------------------------------------------------------- AdamW as LLM runs use it


class TinyLM(torch.nn.Module):
    """A tiny language-model-shaped module: an embedding, a norm, a two-layer MLP without the second
    bias, and an output head (tied to the embedding with tie=True)."""

    def __init__(self, vocab=50, d=16, tie=False, norm=torch.nn.LayerNorm):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.Sequential(norm(d), torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d, bias=False))
        self.head = torch.nn.Linear(d, vocab, bias=False)
        if tie:
            self.head.weight = self.emb.weight


def group_names(model, groups) -> list[list[str]]:
    """The sorted parameter names of each group ("?" for a tensor that is not the model's)."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [sorted(names.get(id(p), "?") for p in g["params"]) for g in groups]


def check_param_groups(llm_param_groups, model, want_decay, want_rest, label):
    """Two groups, the right parameters in each, weight decay 0.1 then 0.0; returns the groups."""
    groups = llm_param_groups(model, 0.1)
    expect_equal(len(groups), 2, f"number of parameter groups ({label})")
    expect_equal(group_names(model, groups), [sorted(want_decay), sorted(want_rest)], f"parameters of the two groups ({label})",
                 hint="Decay only the weight of each Linear; biases, norm parameters and Embedding weights (also when tied) get none.")
    expect_equal([float(g["weight_decay"]) for g in groups], [0.1, 0.0], f"weight_decay of the two groups ({label})")
    return groups


def check_groups_step(model, groups) -> None:
    """With zero gradients Adam's part of the step is 0: only torch's decay moves the weights, by
    (1 - lr * wd), and only in the decay group."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    expect_close(model.blocks[1].weight.detach(), before["blocks.1.weight"] * (1 - 1e-2 * 0.1),
                 "a Linear weight after one step with zero gradient: shrunk by (1 - lr * wd)", rtol=1e-6)
    expect_close(model.blocks[0].weight.detach(), before["blocks.0.weight"], "the LayerNorm gain after the same step: untouched", rtol=0)


def check_update_ratios(update_to_weight_ratios, seed=0) -> None:
    """One AdamW step on random gradients of a TinyLM; every ratio against the norms computed here,
    the zero-initialised LayerNorm bias left out."""
    torch.manual_seed(seed)
    model = TinyLM()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opt.step()
    after = {n: p.detach().clone() for n, p in model.named_parameters()}
    ratios = update_to_weight_ratios(before, after)
    nonzero = sorted(n for n in before if float(before[n].norm()) > 0)
    expect_equal(sorted(ratios), nonzero, "names in update_to_weight_ratios (the zero-initialised LayerNorm bias left out)")
    for n in nonzero:
        expect_close(ratios[n], float((after[n] - before[n]).norm() / before[n].norm()), f"update-to-weight ratio of {n}", rtol=1e-6)
