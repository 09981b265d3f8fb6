"""Checks of 11 theory part 5 (the planner's options: interleaved stages and recomputation), kept
here so that each test cell reads as a few lines of intent.

The visible checks compare a student's `memory_with_options` / `step_time_with_options` with the
closed forms of the notebook's text, computed here from literals (no reference answer); the case
generators draw the hidden inputs (the test cell computes the expected values with the reference,
`solutions_lib.parallel.layout_*` with `chunks=` and `recompute=`). Nothing here knows the answer
beyond what the text states.
"""
from __future__ import annotations

import importlib

import numpy as np

from .grading import expect_close, expect_equal

MEMORY_KEYS = ["activations", "states", "total"]
TIME_KEYS = ["bubble", "compute", "dp", "pp", "total", "tp"]
MODEL_13B = dict(layers=40, hidden=5120, heads=40, seq_len=2048, global_batch=512, micro_batch=1)
TOY_MODEL = dict(layers=4, hidden=1024, heads=8, seq_len=1024, global_batch=16, micro_batch=2)
TOY_CLUSTER = dict(n_gpus=8, gpus_per_node=4, flops=1e14, memory=80e9, intra=(1e-5, 1e11), inter=(2e-5, 1e10))
RECOMPUTE = ("none", "selective", "full")


def layout(dp, tp, pp, cp=1, zero=1, sp=True) -> dict:
    """The notebook's `make_layout` (plain data, so a case needs nothing from the kernel)."""
    return {"dp": int(dp), "tp": int(tp), "pp": int(pp), "cp": int(cp), "zero": int(zero), "sp": bool(sp)}


def forbidden(*allowed) -> list:
    """What the answers of part 5 may not call: the planner, its terms, the memory and comms
    references, and the course's copies in `upstream` other than `allowed`."""
    from . import upstream
    mods = [importlib.import_module(f"solutions_lib.{m}") for m in ("parallel", "planner_terms", "memory", "comms")]
    return [*mods, *upstream.forbidden_except(*allowed)]


def _keys(got, keys, what):
    expect_equal([k for k in keys if k in got], keys, f"keys of {what} (extra keys are fine)",
                 hint=f"Return a dict with the keys {', '.join(map(repr, keys))}.")
    return [got.get(k, float("nan")) for k in keys]


def check_memory_visible(memory_with_options) -> None:
    """13B at (d, t, p) = (8, 1, 4), ZeRO-1, SP: 10 layers per stage, m = 64, s b h = 2048 * 5120."""
    lay, sbh = layout(8, 1, 4), 2048 * 5120
    states = 12 * 5120 ** 2 * 10 * (4 + 12 / 8)
    for what, kw, acts, hint in [
        ("the defaults = memory_per_rank", {}, 10 * 4 * 34 * sbh, "v = 1 and selective: 1F1B holds min(p, m) = 4."),
        ("chunks = 2: held = p + (p-1)/v = 5.5", {"chunks": 2}, 10 * 5.5 * 34 * sbh,
         "Interleaved, device 0 holds p + (p-1)/v micro-batches' worth: 1.375 x 1F1B's p at p = 4, v = 2."),
        ("chunks = 5: held = 4.6", {"chunks": 5}, 10 * (4 + 3 / 5) * 34 * sbh, "p + (p-1)/v: divided by v, not multiplied."),
        ("recompute = 'full': only the layer input, 2 s b h / t", {"recompute": "full"}, 10 * 4 * 2 * sbh, ""),
        ("recompute = 'none': + 5 a s^2 b / t of scores", {"recompute": "none"}, 10 * 4 * (34 + 5 * 40 * 2048 / 5120) * sbh,
         "The a score matrices of s x s: 5 bytes per score (softmax output, dropout mask and output)."),
    ]:
        got = _keys(memory_with_options(lay, MODEL_13B, **kw), MEMORY_KEYS, f"memory_with_options, {what}")
        expect_close(got, [acts, states, acts + states], f"13B (8, 1, 4), ZeRO-1, SP, {what}: [activations, states, total]",
                     rtol=1e-9, unit="B", hint=hint)
    got = memory_with_options(lay, dict(MODEL_13B, global_batch=32), chunks=2)
    expect_close(got.get("activations", float("nan")), 10 * 4 * 34 * sbh, "chunks = 2 with m = p = 4: held = min(5.5, m) = 4",
                 rtol=1e-9, unit="B", hint="A device never holds more than all m micro-batches.")
    got = memory_with_options(layout(4, 2, 4, 1, 1, False), MODEL_13B, recompute="full")
    expect_close(got.get("activations", float("nan")), 10 * 4 * 2 * sbh,
                 "recompute = 'full' without SP, t = 2: 2 s b h on every TP rank (not / t)", rtol=1e-9, unit="B")


def check_step_time_visible(step_time_with_options, step_time) -> None:
    """Part 3's toy (4 layers, h = 1024, 2 nodes of 4 GPUs, (d, t, p) = (2, 2, 2): l = 2, m = 4, T = 2048,
    ZeRO-1) with each option, against the slot formula of the text; and p = 1 against `step_time`."""
    lay = layout(2, 2, 2)
    t_c = 72 * 1024 ** 2 * 2 * 2048 / (2 * 1e14)
    t_tp = 4 * 2 * (2 * 1e-5 + 2 * 1 / 2 * 2048 * 1024 * 2 / 1e11)
    t_pp = 2 * (2e-5 + 2048 * 1024 * 2 / 1e10)
    t_dp = 2 * 1e-5 + 2 * 1 / 2 * (12 * 1024 ** 2 * 2 * 2 / 2) / 1e11
    for what, kw, (c, tp, pp), v, hint in [
        ("the defaults = step_time", {}, (t_c, t_tp, t_pp), 1, "With v = 1 and selective recomputation this is part 3's step_time."),
        ("chunks = 2", {"chunks": 2}, (t_c, t_tp, t_pp), 2,
         "v chunks: v t_pp of sends per micro-batch, and a bubble of (p-1)/v slots of t_c + t_tp + v t_pp (divided, not multiplied)."),
        ("recompute = 'full'", {"recompute": "full"}, (t_c * 4 / 3, t_tp * 3 / 2, t_pp), 1,
         "Full recomputation re-runs the forward: compute x 4/3 and TP traffic x 3/2; sends and DP unchanged."),
        ("recompute = 'none'", {"recompute": "none"}, (t_c, t_tp, t_pp), 1, "Storing the scores saves no time in this model."),
    ]:
        got = _keys(step_time_with_options(lay, TOY_MODEL, TOY_CLUSTER, **kw), TIME_KEYS, f"step_time_with_options, {what}")
        slot = c + tp + v * pp
        want = {"compute": 4 * c, "tp": 4 * tp, "pp": 4 * v * pp, "bubble": (2 - 1) * slot / v, "dp": t_dp,
                "total": (4 * v + 2 - 1) * slot / v + t_dp}
        expect_close(got, [want[k] for k in TIME_KEYS], f"toy, {what}: [{', '.join(TIME_KEYS)}]", rtol=1e-9, unit="s", hint=hint)
    one, lay1 = dict(TOY_CLUSTER, n_gpus=4), layout(2, 2, 1)
    base = step_time(lay1, TOY_MODEL, one)
    got = _keys(step_time_with_options(lay1, TOY_MODEL, one, chunks=3), TIME_KEYS, "step_time_with_options with p = 1")
    expect_close(got, [base[k] for k in TIME_KEYS], "toy on one node, p = 1, chunks = 3: as without chunks",
                 rtol=1e-9, unit="s", hint="Without a pipeline there is nothing to interleave.")


def memory_cases(seed, n=30) -> list[tuple]:
    """(layout, model, chunks, recompute) with v | L/p and p | m (the schedule's rules), cp up to 4."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        a = int(rng.choice([8, 16, 32, 40]))
        L = int(rng.choice([12, 24, 40, 48]))
        d, c, b = int(rng.choice([1, 2, 4, 8])), int(rng.choice([1, 1, 2, 4])), int(rng.choice([1, 2]))
        t = int(rng.choice([x for x in (1, 2, 4, 8) if a % x == 0]))
        p = int(rng.choice([x for x in (1, 2, 3, 4, 6, 8) if L % x == 0]))
        v = int(rng.choice([x for x in (1, 2, 3, 4, 6) if (L // p) % x == 0]))
        model = dict(layers=L, hidden=a * int(rng.choice([64, 128])), heads=a, seq_len=int(rng.choice([1024, 2048, 8192])),
                     global_batch=d * b * p * int(rng.choice([1, 2, 3, 16])), micro_batch=b)
        cases.append((layout(d, t, p, c, int(rng.integers(0, 4)), bool(rng.integers(0, 2))), model, v,
                      str(rng.choice(RECOMPUTE))))
    return cases


def step_time_cases(seed, n=30) -> list[tuple]:
    """(layout, model, cluster, reshard_after_forward, chunks, recompute), cp = 1, d t p = N."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        G = int(rng.choice([4, 8]))
        N = G * int(rng.choice([1, 2, 4, 16]))
        a = int(rng.choice([8, 16, 32, 40]))
        L = int(rng.choice([8, 12, 24, 40, 48]))
        t = int(rng.choice([x for x in (1, 2, 4, 8) if G % x == 0 and a % x == 0]))
        p = int(rng.choice([x for x in range(1, L + 1) if L % x == 0 and (N // t) % x == 0]))
        d, b = N // (t * p), int(rng.choice([1, 2]))
        v = int(rng.choice([x for x in (1, 2, 3, 4, 6) if (L // p) % x == 0]))
        model = dict(layers=L, hidden=a * int(rng.choice([64, 128])), heads=a, seq_len=int(rng.choice([512, 2048, 4096])),
                     global_batch=d * b * p * int(rng.choice([1, 2, 8])), micro_batch=b)
        cluster = dict(n_gpus=N, gpus_per_node=G, flops=float(rng.choice([1e14, 4e14])), memory=80e9,
                       intra=(float(rng.choice([0.0, 5e-6])), float(rng.choice([1.6e10, 4.5e11]))),
                       inter=(float(rng.choice([1e-5, 3e-5])), float(rng.choice([1.5e9, 5e10]))))
        cases.append((layout(d, t, p, 1, int(rng.integers(0, 4)), bool(rng.integers(0, 2))), model, cluster,
                      bool(rng.integers(0, 2)), v, str(rng.choice(RECOMPUTE))))
    return cases


def describe(case) -> str:
    """A check's description for one hidden case (inputs only: rule 2 of docs/GRADING.md)."""
    lay, model, *rest = case
    head = f"(d={lay['dp']}, t={lay['tp']}, p={lay['pp']}, c={lay['cp']}, zero={lay['zero']}, sp={lay['sp']}; " \
           f"L={model['layers']}, h={model['hidden']}, a={model['heads']}, s={model['seq_len']}, B={model['global_batch']}, " \
           f"b={model['micro_batch']}"
    if len(rest) == 2:
        return f"memory_with_options{head}; chunks={rest[0]}, recompute={rest[1]!r}): [{', '.join(MEMORY_KEYS)}]"
    cl, rs, v, rc = rest
    return (f"step_time_with_options{head}; N={cl['n_gpus']}, G={cl['gpus_per_node']}, reshard={rs}; chunks={v}, "
            f"recompute={rc!r}): [{', '.join(TIME_KEYS)}]")
