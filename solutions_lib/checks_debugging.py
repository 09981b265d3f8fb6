"""Checks of 09 (debugging and cost: theory and exercises 1), kept here so that each test cell reads
as a few lines of intent.

Two kinds of helpers live here:

- *case generators* draw the hidden inputs from the seed the test cell passes in (the cell keeps its
  own `term_seed(...)` literals and case lists); each case carries only what the text states about it
  (a batch with a planted bug is "not ok", a correct one is "ok").
- *checks* compare what a student's function returned with an oracle computed here from the inputs:
  a slice, a closed form of the text, or torch's own `clip_grad_norm_`. Where the expected value comes
  from a reference answer (`solutions_lib.cost`), the test cell computes it and passes it in.

Nothing here knows an answer beyond what the notebook's text states. The checks make the same calls to
`solutions_lib.grading` (same descriptions, same order) as the cells they came from, so the records of
the trusted run keep their meaning.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from .grading import expect_between, expect_close, expect_equal, expect_raises, expect_true

# ----------------------------------------------------------------------------------------- 09 theory


def check_shift_random(shift_for_lm, seed: int, batches: int = 5) -> None:
    """`shift_for_lm` on `batches` random integer batches drawn from `seed`: inputs = rows[:, :-1],
    targets = rows[:, 1:] (the slice is the oracle)."""
    rng = np.random.default_rng(seed)
    for _ in range(batches):
        r = torch.as_tensor(rng.integers(0, 1000, size=(int(rng.integers(1, 6)), int(rng.integers(2, 40)))))
        x, y = shift_for_lm(r)
        expect_equal(tuple(x.shape), (r.shape[0], r.shape[1] - 1), "inputs shape")
        expect_equal(x.tolist(), r[:, :-1].tolist(), f"inputs of shift_for_lm on a random {tuple(r.shape)} batch",
                     hint="The inputs drop the LAST token.")
        expect_equal(y.tolist(), r[:, 1:].tolist(), f"targets of shift_for_lm on a random {tuple(r.shape)} batch",
                     hint="Targets must equal inputs shifted by one: target_i = input_(i+1).")


def check_causal_masks(causal_mask, sizes) -> None:
    """`causal_mask(T)` for each T of `sizes`: a bool (T, T) tensor equal to ones(T, T).tril()."""
    for T in sizes:
        m = causal_mask(T)
        expect_true(isinstance(m, torch.Tensor) and m.dtype == torch.bool, f"causal_mask({T}) must be a bool tensor")
        expect_equal(m.tolist(), torch.ones(T, T, dtype=torch.bool).tril().tolist(), f"causal_mask({T})",
                     hint="Shape (T, T); row = query i, column = key j; allowed when j <= i (diagonal included).")


def check_clip_against_torch(clip_coefficient, seed: int, max_norms) -> None:
    """A seeded 7-11-3 MLP's gradients, clipped by torch at each of `max_norms`: the student's
    coefficient times the pre-clip norm must give torch's post-clip norm."""
    import copy

    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(7, 11), torch.nn.Tanh(), torch.nn.Linear(11, 3))
    for max_norm in max_norms:
        net.zero_grad()
        (net(torch.randn(16, 7)) ** 2).sum().backward()
        ref = copy.deepcopy(net)
        for a, b in zip(net.parameters(), ref.parameters()):
            b.grad = a.grad.clone()
        total = float(torch.nn.utils.clip_grad_norm_(ref.parameters(), max_norm))
        post = float(torch.sqrt(sum((p.grad ** 2).sum() for p in ref.parameters())))
        expect_close(total * clip_coefficient(total, max_norm), post,
                     f"post-clip norm for ||g|| = {total:.4g}, max_norm = {max_norm}",
                     rtol=1e-5, hint="torch scales by min(1, max_norm / (norm + 1e-6)).")


def check_throughput_random(throughput, seed: int, n: int = 10) -> None:
    """`throughput` on `n` random five-phase steps: T_step = the sum of the phases, tokens/s = tokens / T_step."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        ph = {k: float(v) for k, v in zip(["data", "forward", "backward", "comm", "optimizer"], rng.uniform(0.001, 2, 5))}
        tokens = int(rng.integers(1, 10**7))
        t, tps = throughput(tokens, ph)
        expect_close(t, sum(ph.values()), "step time", rtol=1e-9, unit="s")
        expect_close(tps, tokens / sum(ph.values()), "tokens/s", rtol=1e-9)


def gpu_hours_cases(seed: int, n: int = 10) -> list[tuple]:
    """`n` random (n_params, n_tokens, n_gpus, mfu, peak_flops) drawn from `seed`."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append((10 ** rng.uniform(7, 11), 10 ** rng.uniform(9, 13), int(rng.integers(1, 2049)),
                    rng.uniform(0.1, 0.7), rng.choice([312e12, 989e12, 125e12])))
    return out


# ----------------------------------------------------------------------- 09 exercises: batch checks


def expect_verdicts(got, cases, describe) -> None:
    """Each verdict of `got` (a bool per case) against the case's last item (True = ok);
    `describe(i, case)` names the case in the message."""
    for i, (case, g) in enumerate(zip(cases, got)):
        expect_equal(bool(g), case[-1], describe(i, case))


def label_shift_cases(seed: int, n: int = 24) -> list[tuple]:
    """(x, y, ok): random batches, a quarter each correctly shifted, targets = inputs, targets shifted
    backwards (target_i = input_(i-1)), and correctly shifted with every third target ignored (-100)."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for k in range(n):
        rows = torch.randint(0, 500, (int(torch.randint(1, 5, (1,), generator=gen)),
                                      int(torch.randint(6, 40, (1,), generator=gen)) + 1), generator=gen)
        x, y = rows[:, :-1], rows[:, 1:].clone()
        kind = k % 4
        if kind == 1:
            y = x.clone()
        elif kind == 2:
            y = torch.cat([rows[:, :1], rows[:, :-2]], 1)           # target_i = input_(i-1)
        elif kind == 3:
            y[:, ::3] = -100                                          # correct, with ignored targets
        cases.append((x, y, kind in (0, 3)))
    return cases


def describe_label_case(i, case) -> str:
    return f"labels_shifted on hidden batch {i} ({'correct' if case[-1] else 'planted bug'})"


def causal_mask_cases(sizes) -> list[tuple]:
    """(mask, ok) for each T of `sizes`: tril as bool and as an additive float mask (causal), and six
    non-causal ones (tril(1), tril(-1), its transpose, all ones, the additive tril(1)); each is causal only
    at T = 1 where the text says so; plus one non-square mask."""
    cases = []
    for T in sizes:
        good = torch.ones(T, T, dtype=torch.bool).tril()
        cases += [(good, True), (torch.zeros(T, T).masked_fill(~good, float("-inf")), True),
                  (torch.ones(T, T, dtype=torch.bool).tril(1), T == 1), (torch.ones(T, T, dtype=torch.bool).tril(-1), False),
                  (good.T.contiguous(), T == 1), (torch.ones(T, T, dtype=torch.bool), T == 1),
                  (torch.zeros(T, T).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(1), float("-inf")), T == 1)]
    cases.append((torch.ones(4, 5, dtype=torch.bool).tril(), False))
    return cases


def describe_mask_case(i, case) -> str:
    m = case[0]
    return f"mask_is_causal on hidden mask {i} of shape {tuple(m.shape)}, dtype {m.dtype}"


def check_padding_visible(padding_ok, make_lm_batch) -> None:
    """Two batches made by the kit's collator `make_lm_batch`: padded with pad id 0 (correct, and with the
    padding attended) and padded with the EOS id 2 (correct, and the collator bug that masks the EOS)."""
    rows = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 0, 0, 0]])
    x, y, att = make_lm_batch(rows, pad_id=0)
    expect_equal(padding_ok(x, y, att, 0), True, "padding_ok on a correctly padded batch")
    expect_equal(padding_ok(x, y, torch.ones_like(att), 0), False, "padding_ok with the padding attended")
    rows = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 2, 2, 2]])          # pad id = EOS id = 2: [5, 6, EOS, pad, pad]
    x, y, att = make_lm_batch(rows, pad_id=2, eos_id=2)
    expect_equal(padding_ok(x, y, att, 2, eos_id=2), True, "padding_ok on a batch padded with its EOS id",
                 hint="The first pad token after the text is its EOS: attended, and its target kept.")
    xc, yc, attc = make_lm_batch(rows, pad_id=2)                # the collator bug: every 2 treated as padding
    expect_equal(padding_ok(xc, yc, attc, 2, eos_id=2), False, "padding_ok when the EOS was masked out with the padding")


def padding_cases(seed: int, make_lm_batch, n: int = 18) -> list[tuple]:
    """(x, y, attention, pad_id, eos_id, ok): `n` batches padded with a pad id of their own (correct,
    padding attended, padding trained on) and `n` padded with their EOS id (correct, the collator bug
    that masks the EOS with the padding, padding attended, padding trained on). `make_lm_batch` is the
    kit's collator (`solutions_lib.debugging.make_lm_batch`)."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for k in range(n):
        B, T = 3, int(torch.randint(6, 30, (1,), generator=gen))
        pad = int(torch.randint(0, 3, (1,), generator=gen))
        rows = torch.randint(3, 300, (B, T + 1), generator=gen)
        for b in range(B):
            rows[b, int(torch.randint(2, T + 1, (1,), generator=gen)):] = pad
        x, y, att = make_lm_batch(rows, pad_id=pad)
        kind = k % 3
        if kind == 1:
            att = torch.ones_like(att)
            if bool(torch.equal(att.bool(), x != pad)):
                continue
        elif kind == 2:
            y = rows[:, 1:]
            if not (y == pad).any():
                continue
        cases.append((x, y, att, pad, None, kind == 0))
    for k in range(n):                                  # pad id = EOS id: each text ends with its EOS
        B, T = 3, int(torch.randint(6, 30, (1,), generator=gen))
        eos = int(torch.randint(0, 3, (1,), generator=gen))
        rows = torch.randint(3, 300, (B, T + 1), generator=gen)
        for b in range(B):
            m = int(torch.randint(1, T, (1,), generator=gen))
            rows[b, m] = eos
            rows[b, m + 1:] = eos
        x, y, att = make_lm_batch(rows, pad_id=eos, eos_id=eos)
        kind = k % 4
        if kind == 1:
            x, y, att = make_lm_batch(rows, pad_id=eos)       # the collator bug: EOS masked and not trained
        elif kind == 2:
            att = torch.ones_like(att)                             # padding attended
        elif kind == 3:
            y = rows[:, 1:]                                        # padding trained on
        cases.append((x, y, att, eos, eos, kind == 0))
    return cases


def describe_padding_case(i, case) -> str:
    return (f"padding_ok on hidden batch {i} ({'correct' if case[-1] else 'planted bug'}"
            f"{', pad id = EOS id' if case[4] is not None else ''})")


# ------------------------------------------------------------------- 09 exercises: clip_and_trace


def lm_batches(data, size: int, n: int) -> list[tuple]:
    """`n` (inputs, targets) batches of `size` rows each from the token rows `data`, shifted by one."""
    return [(data[size * s:size * s + size, :-1], data[size * s:size * s + size, 1:]) for s in range(n)]


def sgd_clip_trace(model, batches, max_norm: float, lr: float) -> list[tuple]:
    """The oracle of `clip_and_trace`, with torch's own `clip_grad_norm_`: SGD(lr) steps on
    cross-entropy, one (pre-clip norm, post-clip norm) per batch."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    out = []
    for x, y in batches:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        pre = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
        post = float(torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters() if p.grad is not None)))
        opt.step()
        out.append((pre, post))
    return out


def check_clip_trace(got, want, length_message: str, at=lambda i: f" at step {i}", rtol: float = 1e-4) -> None:
    """`got` (the student's (pre, post) pairs) against `want` (the oracle's), pair by pair; `at(i)`
    ends the description of pair i."""
    expect_true(len(got) == len(want), length_message)
    for i, ((gp, gq), (wp, wq)) in enumerate(zip(got, want)):
        expect_close(gp, wp, f"pre-clip norm{at(i)}", rtol=rtol, hint="The norm over ALL gradient entries of ALL parameters.")
        expect_close(gq, wq, f"post-clip norm{at(i)}", rtol=rtol,
                     hint="min(1, max_norm / (norm + 1e-6)) scales every gradient.")


def small_run_recipe(seed: int, steps: int) -> list[float]:
    """The recipe the text of `small_run` states, with the kit's TinyLM, RowLoader and synthetic_tokens:
    seed torch, TinyLM(), AdamW(lr=3e-3), batches of 8 rows drawn by RowLoader(seed=seed), gradients
    zeroed every step; the loss of each step."""
    from . import debugging as kit

    torch.manual_seed(seed)
    model = kit.TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = kit.RowLoader(kit.synthetic_tokens(256, 17), 8, seed=seed)
    out = []
    for _ in range(steps):
        rows = loader.next()
        loss = F.cross_entropy(model(rows[:, :-1]).flatten(0, 1), rows[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def check_clip_runs(clip_and_trace, runs, guard) -> None:
    """For each (seed, max_norm, lr) of `runs`: a seeded TinyLM(24, 24) on four batches of 6 rows, seen
    twice, against `sgd_clip_trace`; the student's call runs inside `guard()` (the cell's no_delegation)."""
    import copy

    from . import debugging as kit

    for seed, mn, lr in runs:
        torch.manual_seed(seed)
        m = kit.TinyLM(vocab=24, hidden=24)
        bs = lm_batches(kit.synthetic_tokens(24, 11, vocab=24, seed=seed), 6, 4) * 2
        want = sgd_clip_trace(copy.deepcopy(m), bs, mn, lr)
        with guard():
            got = clip_and_trace(copy.deepcopy(m), bs, mn, lr)
        check_clip_trace(got, want, "one pair per batch", at=lambda i: f", hidden run {seed}, step {i}", rtol=1e-3)


# ---------------------------------------------------------------------- 09 exercises: timed_steps

PHASES = ("data", "forward", "backward", "optimizer", "checkpoint")


def check_timed_steps(recs, tps, n: int, ck: int, tokens: int, wall: float, what: str) -> None:
    """What holds for any honest timing of `n` steps checkpointing every `ck`-th step of `tokens` tokens:
    one record per step with every phase, the phases inside the step, checkpoints on the right steps,
    tokens/s = total tokens / total step time, and the step times inside the call's wall time `wall`
    (which the test cell measures around the call)."""
    PH = PHASES
    expect_true(len(recs) == n, f"{what}: expected {n} step records, got {len(recs)}")
    for i, r in enumerate(recs):
        expect_true(all(k in r for k in PH + ("step", "tokens")), f"{what}: step {i} lacks a key of {PH + ('step', 'tokens')}")
        expect_between([r[p] for p in PH[:4]], 0, None, f"{what}: step {i}: times of the phases {PH[:4]}", unit="s",
                       hint="Every phase but the checkpoint takes some time.")
        expect_true(r["tokens"] == tokens, f"{what}: step {i} reports {r['tokens']} tokens, expected {tokens}")
        # timings vary with the machine's load: check what holds for any timing (the phases are parts of the step)
        s = sum(r[p] for p in PH)
        expect_between(s - r["step"] * (1 + 1e-6), None, 1e-6, f"{what}: step {i}: the phases' total time beyond the step time",
                       unit="s", hint="The phases must fit inside the step: time the whole step, from before the data phase "
                                      "to after the checkpoint phase.")
    expect_equal([i for i, r in enumerate(recs) if r["checkpoint"] > 0], [i for i in range(n) if (i + 1) % ck == 0],
                 f"{what}: the steps (from 0) that saved a checkpoint",
                 hint="Save on the steps where (step + 1) % checkpoint_every == 0, i.e. after every k-th step.")
    total = sum(r["step"] for r in recs)
    phases = sum(r[p] for r in recs for p in PH)
    expect_between(phases / total, 0.5, None, f"{what}: the share of the step time the phases cover",
                   hint="Time each phase around its own work.")
    expect_close(tps, n * tokens / total, f"{what}: tokens/s", rtol=0.01, hint="total tokens / total step time",
                 measured=True)
    expect_between(total / wall, None, 1, f"{what}: your step times' total over the wall time of the call",
                   hint="The step times must fit inside the call.")


def check_trained(before, model, loader, steps: int, batch: int, rows: int) -> None:
    """After `steps` steps of timed_steps: every trainable parameter moved from `before` (copies taken
    before the call), and the loader of `rows` rows advanced by one batch of `batch` rows per step."""
    expect_true(all(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()) if b.requires_grad),
                "the model's parameters did not change: timed_steps must really train")
    expect_true(loader.pos == (steps * batch) % rows or loader.pos == batch,
                "timed_steps must draw one batch per step from the loader")


# --------------------------------------------------------------------- 09 exercises: the checklist


def check_checklist_visible(my_launch_checklist, good) -> None:
    """The kit's good configuration passes every check (at least 7 of them); world_size = 4 with
    dp * tp * pp = 1 fails one."""
    res = my_launch_checklist(good)
    expect_true(isinstance(res, dict) and len(res) >= 7, "my_launch_checklist must return a dict of at least 7 named checks")
    expect_true(all(bool(v) for v in res.values()), f"the good configuration fails: {[k for k, v in res.items() if not v]}")
    bad = my_launch_checklist(good.with_(world_size=4))
    expect_true(not all(bad.values()), "dp*tp*pp = 1 but world_size = 4: no check failed")


def checklist_cases(good, seed: int) -> tuple[list, dict]:
    """(good configurations, {planted mistake: configuration}) derived from the kit's `good`
    `LaunchConfig`, drawn from `seed`: one good 2x2x2 layout, and one bad configuration per check
    of the text (warm-up, tokens per step, parallelism product, label shift, sampling, each part of
    the checkpoint, logging, the memory estimate, the target run's fit)."""
    rng = np.random.default_rng(seed)
    goods = [good.with_(dp=2, world_size=8, tp=2, pp=2, planned_tokens_per_step=256, warmup_steps=int(rng.integers(5, 30)),
                        logged=("train_loss", "val_loss", "tokens_per_s"), target_params=float(rng.uniform(3e8, 1e9)))]
    parts = ["model", "optimizer", "scheduler", "rng", "dataloader"]
    rng.integers(0, 5)    # (a draw kept so that the later draws stay those of the cell this came from)
    short = good.with_(steps=40)   # shorter runs keep the grading fast
    goods = [g.with_(steps=40) for g in goods]
    bads = {
        "warmup never ends": short.with_(warmup_steps=int(rng.integers(100, 1000))),
        "tokens per step off the plan": short.with_(grad_accum=int(rng.integers(2, 5))),
        "parallelism product": short.with_(dp=2, tp=2, world_size=int(rng.choice([2, 8])), planned_tokens_per_step=256),
        "labels not shifted": short.with_(shift_labels=False),
        "loader with replacement": short.with_(replacement=True),
        **{f"checkpoint without {d}": short.with_(steps=20, checkpoint_includes=tuple(p for p in parts if p != d))
           for d in parts},   # 20 steps: every other check still passes, and the five runs stay cheap
        "no validation loss logged": short.with_(logged=("train_loss", "tokens_per_s")),
        "memory estimate without activations": short.with_(memory_counts=("weights", "grads", "optimizer")),
        "target run does not fit": short.with_(target_params=float(rng.uniform(5e9, 2e10))),
    }
    return goods, bads


def check_checklist_verdicts(got_good, got_bad: dict) -> None:
    """Every check passes on each good configuration; some check fails on each planted mistake."""
    for r in got_good:
        expect_true(all(bool(v) for v in r.values()), f"a hidden good configuration fails {[k for k, v in r.items() if not v]}")
    for k, r in got_bad.items():
        expect_true(not all(bool(v) for v in r.values()), f"planted mistake '{k}': every check passed")


# ------------------------------------------------------------------------ 09 exercises: the costs

#: The keyword arguments of `solutions_lib.cost.TrainingCostEstimator` a hidden CostEstimator case sets.
COST_KEYS = ("n_params", "n_tokens", "n_gpus", "mfu", "peak_flops", "price_per_gpu_hour", "spot_discount",
             "lost_hours_per_preemption")


def cost_cases(seed: int, n: int = 12) -> list[dict]:
    """`n` random CostEstimator keyword sets (COST_KEYS) drawn from `seed`."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        cases.append(dict(n_params=float(10 ** rng.uniform(7, 11)), n_tokens=float(10 ** rng.uniform(9, 12.5)),
                          n_gpus=int(rng.integers(1, 513)), mfu=float(rng.uniform(0.2, 0.6)),
                          peak_flops=float(rng.choice([312e12, 989e12])), price_per_gpu_hour=float(rng.uniform(1, 5)),
                          spot_discount=float(rng.uniform(0.2, 0.8)), lost_hours_per_preemption=float(rng.uniform(0.1, 2))))
    return cases


def estimates(CostEstimator, cases) -> list[tuple]:
    """(hours(), on_demand_cost(), spot_cost(3), break_even_preemptions()) of the student's class per case."""
    out = []
    for c in cases:
        e = CostEstimator(**c)
        out.append((e.hours(), e.on_demand_cost(), e.spot_cost(3), e.break_even_preemptions()))
    return out


def expected_estimates(Estimator, cases) -> list[tuple]:
    """(compute_hours, on_demand_cost, spot_cost_with(3), break_even_preemptions) of `Estimator`
    (the reference class the test cell passes in) per case."""
    refs = [Estimator(**c) for c in cases]
    return [(r.compute_hours, r.on_demand_cost, r.spot_cost_with(3), r.break_even_preemptions) for r in refs]


def check_estimates(cases, got, expected) -> None:
    """The student's `estimates` against the expected tuples (which the test cell computes)."""
    for c, g, w in zip(cases, got, expected):
        expect_close(g[0], w[0], f"hours() for {c}", rtol=1e-9, unit="h")
        expect_close(g[1], w[1], "on_demand_cost()", rtol=1e-9, unit="USD")
        expect_close(g[2], w[2], "spot_cost(3)", rtol=1e-9, unit="USD")
        expect_equal(int(g[3]), w[3], f"break_even_preemptions() for {c}")


def check_cost_validation(CostEstimator, ok: dict, bads) -> None:
    """CostEstimator(**ok) with each of `bads` merged in must raise ValueError."""
    for bad in bads:
        expect_raises(lambda: CostEstimator(**{**ok, **bad}), ValueError, f"CostEstimator with {bad}")


def check_ch26_20(ch26_20: dict) -> None:
    """Chapter 26 exercise 20's table: on-demand and spot cost and break-even preemptions of three runs
    (the text's numbers: 312 TFLOP/s, $3.50 per GPU-hour, 65 % spot discount, 0.5 h lost each)."""
    want = {"BERT-base": (15.0819, 5.2787, 3), "GPT-2 medium": (614.316, 215.011, 41), "3B vision": (73802.3, 25830.8, 1224)}
    for name, (od, sp, k) in want.items():
        expect_close(ch26_20[name]["on_demand"], od, f"ch26_20[{name!r}]['on_demand']", rtol=1e-4, unit="USD",
                     hint="6 N D / (n_gpus * 312e12 * MFU) seconds, times n_gpus GPUs, times $3.50 per GPU-hour.")
        expect_close(ch26_20[name]["spot"], sp, f"ch26_20[{name!r}]['spot']", rtol=1e-4, unit="USD")
        expect_equal(int(ch26_20[name]["break_even"]), k, f"ch26_20[{name!r}]['break_even']",
                     hint="Smallest k with n (T + 0.5 k)(0.35)(3.50) > n T (3.50).")


def check_ch26_21(ch26_21: dict, more_compute) -> None:
    """Chapter 26 exercise 21's numbers, from the text's two options (32 on-demand GPUs, 64 spot GPUs)."""
    expect_equal(sorted(k for k in ("A", "B", "A_budget_flops", "B_budget_flops") if k in ch26_21),
                 ["A", "A_budget_flops", "B", "B_budget_flops"], "keys set in ch26_21",
                 hint="Fill ch26_21['A'], ['B'] (wall-clock h, cost) and ['A_budget_flops'], ['B_budget_flops'].")
    expect_close(ch26_21["A"][0], 61.827, "option A wall-clock", rtol=1e-3, unit="h", hint="1e21 / (32 * 312e12 * 0.45) s.")
    expect_close(ch26_21["A"][1], 6924.66, "option A cost", rtol=1e-3, unit="USD")
    expect_close(ch26_21["B"][0], 21.68, "option B wall-clock", rtol=1e-2, unit="h",
                 hint="19.87 h of compute plus 1 h per preemption, 2 preemptions per day of wall-clock.")
    expect_close(ch26_21["B"][1], 3052.5, "option B cost", rtol=1e-2, unit="USD")
    expect_close(ch26_21["A_budget_flops"], 7.2206e21, "FLOPs $50k buys with A", rtol=1e-3)
    expect_close(ch26_21["B_budget_flops"], 1.638e22, "FLOPs $50k buys with B", rtol=1e-2)
    expect_equal(more_compute, "B", "more_compute")


def option_cases(seed: int, n: int = 8) -> list[tuple]:
    """`n` random (flops, n_gpus, mfu, price, preemptions per day, lost hours each) drawn from `seed`, with
    r L / 24 <= 0.0625, so that both of the text's assumptions hold within 1 %."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        f, g, m, p = float(10 ** rng.uniform(19, 23)), int(rng.integers(8, 1025)), float(rng.uniform(0.2, 0.6)), float(rng.uniform(0.8, 4))
        r, L = float(rng.uniform(0, 1)), float(rng.uniform(0, 1.5))
        out.append((f, g, m, p, r, L))
    return out


def expected_option(Estimator, case) -> tuple:
    """(spot wall hours, spot cost, FLOPs within $50k) of `Estimator` (the reference class the test cell
    passes in) for one option case, as a spot run with no discount."""
    f, g, m, p, r, L = case
    e = Estimator(1.0, 0.0, g, m, price_per_gpu_hour=p, spot_discount=0.0, preemptions_per_day=r,
                  lost_hours_per_preemption=L, total_flops_target=f)
    return e.spot_wall_hours, e.spot_cost, e.flops_within_budget(50_000, spot=True)


def check_option(case, got, want) -> None:
    """((wall hours, cost), FLOPs in a $50k budget) against the expected triple the cell computed."""
    f, g, m, p, r, L = case
    expect_close(got[0][0], want[0], f"wall-clock for {f:.2e} FLOPs on {g} GPUs, {r:.2f}/day x {L:.2f} h", rtol=1e-2, unit="h")
    expect_close(got[0][1], want[1], "cost", rtol=1e-2, unit="USD")
    expect_close(got[1], want[2], "FLOPs in a $50k budget", rtol=1e-2)


def check_ch26_23(ch26_23: dict) -> None:
    """Chapter 26 exercise 23's design numbers: 500M parameters, 300B examples a month, 32 GPUs at MFU 0.4,
    $3.50 per GPU-hour, a full pass in 6 h, 2 GB/s to storage, one failure in 4 days."""
    expect_close(ch26_23["state_bytes"], 8e9, "state bytes of 500M params", rtol=1e-9, unit="B")
    full_h = 6 * 5e8 * 3e11 / (32 * 312e12 * 0.4) / 3600   # 62.6 h
    expect_close(ch26_23["full_retrain_hours"], full_h, "full 30-day pass", rtol=1e-6, unit="h",
                 hint="6 * 5e8 * 3e11 FLOPs / (32 * 312e12 * 0.4) FLOP/s.")
    expect_close(ch26_23["incremental_hours"], full_h / 30, "one day of new data", rtol=1e-6, unit="h")
    expect_close(ch26_23["required_examples_per_s"], 3e11 / 21600, "examples/s for a full pass in 6 h", rtol=1e-6)
    expect_close(ch26_23["daily_cost"], 32 * full_h / 30 * 3.5, "daily cost", rtol=1e-6, unit="USD")
    expect_close(ch26_23["checkpoint_interval_s"], math.sqrt(2 * 4 * 86400), "Young's interval", rtol=1e-6, unit="s")


def design_cases(seed: int, n: int = 8) -> list[tuple]:
    """`n` random design_numbers arguments (N, W, d, n_gpus, deadline h, mfu, price, bandwidth, MTBF s)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        N, W, d, g, dl = float(10 ** rng.uniform(7, 10)), float(10 ** rng.uniform(10, 12)), float(10 ** rng.uniform(8, 10)), int(rng.integers(1, 257)), float(rng.uniform(1, 24))
        m, p, bw, M = float(rng.uniform(0.2, 0.6)), float(rng.uniform(1, 5)), float(10 ** rng.uniform(8, 10)), float(rng.uniform(3600, 1e6))
        out.append((N, W, d, g, dl, m, p, bw, M))
    return out


def expected_design(Estimator, case) -> dict:
    """The six design numbers of one case: 16 bytes of state per parameter, the full and one day's
    retraining hours and the daily cost from `Estimator` (the reference class the test cell passes in),
    the examples/s a full pass by the deadline needs, and Young's interval sqrt(2 C M)."""
    N, W, d, g, dl, m, p, bw, M = case
    full = Estimator(N, W, g, m, price_per_gpu_hour=p)
    inc = Estimator(N, d, g, m, price_per_gpu_hour=p)
    return {"state_bytes": 16 * N, "full_retrain_hours": full.compute_hours, "incremental_hours": inc.compute_hours,
            "required_examples_per_s": W / (dl * 3600), "daily_cost": inc.on_demand_cost,
            "checkpoint_interval_s": math.sqrt(2 * 16 * N / bw * M)}


def check_design(case, got: dict, want: dict) -> None:
    """Each key of `want` (the expected design numbers the cell computed) against the student's dict."""
    for k, v in want.items():
        expect_close(got[k], v, f"design_numbers(...)[{k!r}] for N = {case[0]:.3g}, {case[3]} GPUs", rtol=1e-6)
