"""The test machinery of 09 (solutions_lib/checks_debugging.py and the checks added to
solutions_lib/probes_profiling.py): each check accepts a correct answer and rejects a classic
wrong one with a message that names what was checked."""
from __future__ import annotations

import math

import pytest
import torch

from solutions_lib import checks_debugging as cd
from solutions_lib import debugging as kit
from solutions_lib import probes_profiling as pp
from solutions_lib.grading import GradingError


def _fails(fn, *args, match: str, **kw):
    with pytest.raises(GradingError, match=match):
        fn(*args, **kw)


# ----------------------------------------------------------------------------------------- theory

def test_theory_checks_accept_correct_and_reject_wrong():
    cd.check_shift_random(lambda r: (r[:, :-1], r[:, 1:]), 9101)
    _fails(cd.check_shift_random, lambda r: (r[:, 1:], r[:, :-1]), 9101, match="inputs of shift_for_lm")

    cd.check_causal_masks(lambda T: torch.ones(T, T, dtype=torch.bool).tril(), (1, 2, 7))
    _fails(cd.check_causal_masks, lambda T: torch.ones(T, T).tril(), (2,), match="bool tensor")
    _fails(cd.check_causal_masks, lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1), (2,), match=r"causal_mask\(2\)")

    cd.check_clip_against_torch(lambda n, m: min(1.0, m / (n + 1e-6)), 9102, (0.05, 50.0))
    _fails(cd.check_clip_against_torch, lambda n, m: m / (n + 1e-6), 9102, (50.0,), match="post-clip norm")

    cd.check_throughput_random(lambda n, ph: (sum(ph.values()), n / sum(ph.values())), 9103, 3)
    _fails(cd.check_throughput_random, lambda n, ph: (max(ph.values()), n / max(ph.values())), 9103, 3,
           match="step time")
    assert len(cd.gpu_hours_cases(9104, 4)) == 4


# -------------------------------------------------------------------------------- exercises 1

def _labels_ok(x, y):
    return not kit.label_shift_problems(x, y)


def test_verdict_cases_hold_what_they_say():
    cases = cd.label_shift_cases(9201, 8)
    cd.expect_verdicts([_labels_ok(x, y) for x, y, _ in cases], cases, cd.describe_label_case)
    _fails(cd.expect_verdicts, [True] * len(cases), cases, cd.describe_label_case, match="planted bug")

    masks = cd.causal_mask_cases((1, 3))
    cd.expect_verdicts([not kit.causal_mask_problems(m) for m, _ in masks], masks, cd.describe_mask_case)

    pads = cd.padding_cases(9203, kit.make_lm_batch, 4)
    ok = [not kit.padding_mask_problems(x, y, a, p, eos_id=e) for x, y, a, p, e, _ in pads]
    cd.expect_verdicts(ok, pads, cd.describe_padding_case)
    _fails(cd.expect_verdicts, [True] * len(pads), pads, cd.describe_padding_case, match="padding_ok on hidden batch")

    good = lambda x, y, a, p, eos_id=None: not kit.padding_mask_problems(x, y, a, p, eos_id=eos_id)  # noqa: E731
    cd.check_padding_visible(good, kit.make_lm_batch)
    _fails(cd.check_padding_visible, lambda *a, **k: True, kit.make_lm_batch, match="padding attended")


def test_clip_trace_oracle_and_runs():
    torch.manual_seed(1)
    m = kit.TinyLM(vocab=16, hidden=16)
    bs = cd.lm_batches(kit.synthetic_tokens(16, 9, vocab=16, seed=5), 4, 4)
    want = cd.sgd_clip_trace(m, bs, 0.2, 0.1)
    cd.check_clip_trace(want, want, "four pairs")
    _fails(cd.check_clip_trace, [(p, p) for p, _ in want], want, "four pairs", match="post-clip norm at step")
    _fails(cd.check_clip_trace, want[:3], want, "four pairs", match="four pairs")

    import contextlib
    cd.check_clip_runs(lambda model, b, mn, lr: cd.sgd_clip_trace(model, b, mn, lr), [(9211, 0.05, 0.5)],
                       guard=contextlib.nullcontext)


def _records(n, ck, tokens, step=0.01):
    return [{"data": step / 10, "forward": step / 5, "backward": step / 5, "optimizer": step / 10,
             "checkpoint": step / 10 if (i + 1) % ck == 0 else 0.0, "step": step, "tokens": tokens} for i in range(n)]


def test_timed_steps_checks():
    recs = _records(8, 4, 256)
    cd.check_timed_steps(recs, 8 * 256 / 0.08, 8, 4, 256, 1.0, "ok")
    _fails(cd.check_timed_steps, _records(8, 1, 256), 8 * 256 / 0.08, 8, 4, 256, 1.0, "ck", match="saved a checkpoint")
    _fails(cd.check_timed_steps, recs, 8 * 256 / 0.08, 8, 4, 256, 0.01, "wall", match="wall time")

    m = kit.TinyLM(hidden=8)
    before = [p.detach().clone() for p in m.parameters()]
    loader = kit.RowLoader(kit.synthetic_tokens(96, 21, seed=1), 12)
    _fails(cd.check_trained, before, m, loader, steps=9, batch=12, rows=96, match="did not change")


def test_small_run_recipe_is_seeded():
    assert cd.small_run_recipe(3, 4) == cd.small_run_recipe(3, 4) != cd.small_run_recipe(4, 4)


def test_checklist_cases():
    good = kit.LaunchConfig()
    goods, bads = cd.checklist_cases(good, 9241)
    assert len(goods) == 1 and len(bads) == 13
    cd.check_checklist_verdicts([{"a": True}], {"x": {"a": False}})
    _fails(cd.check_checklist_verdicts, [{"a": True}], {"x": {"a": True}}, match="planted mistake 'x'")


def test_cost_checks():
    from solutions_lib.cost import TrainingCostEstimator as E

    cases = cd.cost_cases(9251, 3)
    exp = cd.expected_estimates(E, cases)
    cd.check_estimates(cases, exp, exp)
    _fails(cd.check_estimates, cases, [(h * 3600, *rest) for h, *rest in exp], exp, match=r"hours\(\) for")

    case = cd.option_cases(9252, 1)[0]
    w = cd.expected_option(E, case)
    cd.check_option(case, ((w[0], w[1]), w[2]), w)
    _fails(cd.check_option, case, ((w[0], w[1] * 2), w[2]), w, match="cost")

    case = cd.design_cases(9261, 1)[0]
    want = cd.expected_design(E, case)
    cd.check_design(case, want, want)
    _fails(cd.check_design, case, {**want, "checkpoint_interval_s": want["checkpoint_interval_s"] / math.sqrt(2)}, want,
           match="checkpoint_interval_s")
    _fails(cd.check_ch26_21, {"A": (61.827, 6924.66)}, "B", match="keys set in ch26_21")
    _fails(cd.check_ch26_23, {"state_bytes": 2e9}, match="state bytes")


# ----------------------------------------------------------------------- exercises 2: profiling

def _self_ms(trace):          # a correct parser (what the hidden tests compare with)
    threads = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            threads.setdefault(e.get("tid"), []).append(e)
    out = {}
    for events in threads.values():
        events = sorted(events, key=lambda e: (e["ts"], -e["dur"]))
        stack, children = [], [0.0] * len(events)
        for i, e in enumerate(events):
            while stack and events[stack[-1]]["ts"] + events[stack[-1]]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                children[stack[-1]] += e["dur"]
            stack.append(i)
        for e, c in zip(events, children):
            out[e["name"]] = out.get(e["name"], 0.0) + (e["dur"] - c) / 1000.0
    return out


def _phase_ms(trace, labels=("forward", "backward", "optimizer")):
    out = {label: 0.0 for label in labels}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in out:
            out[e["name"]] += e["dur"] / 1000.0
    return out


def _counts(trace, phase):
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
               if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") == phase]
    out = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and any(a <= e["ts"] < b for a, b in windows):
            out[e["name"]] = out.get(e["name"], 0) + 1
    return out


def test_profiling_visible_checks():
    phases = ("forward", "backward", "optimizer")
    pp.check_phase_times_visible(_phase_ms, phases)
    _fails(pp.check_phase_times_visible, lambda t, labels=phases: {k: 1.0 for k in labels}, phases, match="hand-made")

    pp.check_self_times_visible(_self_ms)
    _fails(pp.check_self_times_visible, lambda t: {e["name"]: e.get("dur", 0) / 1000 for e in t["traceEvents"]},
           match="operator names")

    pp.check_op_counts_edges(_counts)
    _fails(pp.check_op_counts_edges, lambda t, p: {"aten::mm": 2}, match="window edges")

    peak = lambda t, phases=phases: (300, "backward")  # noqa: E731
    pp.check_memory_peak_visible(peak)
    _fails(pp.check_memory_peak_visible, lambda t, phases=phases: (300, "forward"), match="memory_peak")


def test_profiling_harness():
    import contextlib

    trace = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": 0.0, "dur": 1.0}]}

    def mutating(t):
        t["traceEvents"].clear()
        return len(t["traceEvents"])

    assert pp.call_on_copies(mutating, [(trace,), (trace,)], guard=contextlib.nullcontext) == [0, 0]
    assert len(trace["traceEvents"]) == 1          # each call got its own copy
    pp.check_self_times(_self_ms(trace), _self_ms(trace), "one op", False)
    _fails(pp.check_self_times, {"aten::mm": 0.001, "x": 1.0}, _self_ms(trace), "one op", False, match="not cpu_op")
    pp.check_state_bytes({"parameters": 4, "gradients": 4, "optimizer": 12}, (4, 4, 12), ("p", "g", "o"))
    _fails(pp.check_state_bytes, {"parameters": 4, "gradients": 4, "optimizer": 8}, (4, 4, 12), ("p", "g", "o"),
           pp.STATE_HINTS, match="o")
