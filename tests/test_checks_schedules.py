"""solutions_lib.checks_schedules (02 exercises): the checks accept the notebook's solution and reject
a wrong answer from the bank with the message that names the slip."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from solutions_lib import checks_schedules as C
from solutions_lib import schedules as ref
from solutions_lib.course import notebooks as nbs
from solutions_lib.grading import GradingError

from conftest import ROOT

NB = ROOT / "source" / "02_lr_schedules" / "exercises.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "02_lr_schedules" / "exercises"


def _ns() -> dict:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return {"np": np, "torch": torch, "math": math, "plt": plt}


@pytest.fixture(scope="module")
def good():
    ns = _ns()
    for c in nbs.read(NB).cells:
        if c.cell_type == "code" and not (nbs.nbgrader_md(c).get("grade") and not nbs.nbgrader_md(c).get("solution")):
            exec(nbs.strip_solution_markers(c.source), ns)      # setup, answers and demos: the solved notebook
    return ns


def test_schedules_against_torch(good):
    C.check_step_decay(good["step_decay"])
    C.check_polynomial_decay(good["polynomial_decay"])
    C.check_steps_from_fraction(good["steps_from_fraction"])
    C.check_one_cycle(good["one_cycle"])
    C.check_wsd(good["wsd"], good["tokens_before_cooldown"])
    C.check_token_budget(good["fit_schedule_to_budget"])
    C.check_scaling_table(good["linear_scaling_table"])
    C.check_noise_scale(good["two_batch_noise_scale"], good["exact_b_simple"])
    C.check_plotted_traces(good["diagnose_lr_trace"])
    C.check_clean_traces(good["diagnose_lr_trace"])


def test_hidden_cases_compare_with_the_reference(good):
    cases = C.step_decay_cases(1, n=10)
    C.compare("step_decay", cases, [good["step_decay"](*c) for c in cases], [ref.step_decay(*c) for c in cases])
    cases, tcases = C.wsd_cases(2, n=10, n_tokens=5)
    assert len(cases) == 10 and len(tcases) == 5 and cases == C.wsd_cases(2, n=10, n_tokens=5)[0]
    C.compare("wsd", cases, [good["wsd"](*c) for c in cases], [ref.wsd(*c) for c in cases], atol=1e-15)
    traces = C.buggy_traces(3, per_bug=2)
    assert sorted(t["bug"] for t in traces) == sorted(C.BUGS[1:] * 2)
    assert C.diagnose_all(good["diagnose_lr_trace"], traces) == [t["bug"] for t in traces]
    d, trace = C.design_and_trace(good["design_pretraining_schedule"], C.PRETRAINING_PROBLEM)
    C.check_design(d, trace, C.PRETRAINING_PROBLEM, ref.check_pretraining_design)


def test_forbidden_holds_the_references_and_torch_schedulers():
    f = C.forbidden()
    assert ref in f and torch.optim.lr_scheduler in f


def test_checks_reject_wrong_answers(good):
    slips = [("step_decay_answer__decays_one_step_early", lambda ns: C.check_step_decay(ns["step_decay"]), "StepLR"),
             ("one_cycle_answer__linear_anneal", lambda ns: C.check_one_cycle(ns["one_cycle"]), "OneCycleLR"),
             ("noise_scale_answer__g2_weights_swapped",
              lambda ns: C.check_noise_scale(ns["two_batch_noise_scale"], ns["exact_b_simple"]), "|G|^2"),
             ("lr_trace_answer__exact_equality", lambda ns: C.check_clean_traces(ns["diagnose_lr_trace"]), "float32")]
    for wrong, check, words in slips:
        ns = dict(good)
        exec((BANK / f"{wrong}.py").read_text(), ns)
        with pytest.raises(GradingError, match=words.replace("|", r"\|").replace("^", r"\^")):
            check(ns)
