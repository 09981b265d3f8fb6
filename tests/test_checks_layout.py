"""The checks of 11 theory parts 1-4 (`solutions_lib.checks_layout`) accept the notebook's own
solution cells and reject wrong answers from the bank with a message that names the case; the
case generators give the hidden cells valid inputs (the reference takes every one of them).

The answers run in a namespace built from the notebook's setup cell and solution cells (markers
stripped); the wrong answers are the bank's files (tests/wrong_answers/11_model_parallel/theory/)."""
from __future__ import annotations

from pathlib import Path

import pytest

from solutions_lib import checks_layout as cl
from solutions_lib import parallel as ref
from solutions_lib import upstream
from solutions_lib.course import notebooks as nbs
from solutions_lib.grading import GradingError

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "source" / "11_model_parallel" / "theory.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "11_model_parallel" / "theory"
ANSWERS = ("layer_comm_bytes", "memory_per_rank", "step_time", "best_layout")


def _namespace(**wrong: str) -> dict:
    """The setup cell and the answer cells of parts 1-4, with the bank files `wrong` ({answer
    grade_id: file stem}) in their place; best_layout on the course's memory and time models."""
    cells = nbs.read(NB).cells
    ns: dict = {"__name__": "theory_under_test"}
    exec(compile(next(c for c in cells if c.cell_type == "code").source, "setup", "exec"), ns)
    for c in cells:
        gid = nbs.nbgrader_md(c).get("grade_id")
        if gid in ANSWERS:
            src = ((BANK / f"{gid}__{wrong[gid]}.py").read_text() if gid in wrong
                   else nbs.strip_solution_markers(c.source))
            exec(compile(src, gid, "exec"), ns)
    return ns


def test_the_solution_passes_every_visible_check():
    ns = _namespace()
    cl.check_layer_comm_tp_sp(ns["layer_comm_bytes"])
    cl.check_layer_comm_pp_cp(ns["layer_comm_bytes"])
    cl.check_memory_per_rank(ns["memory_per_rank"])
    cl.check_step_time(ns["step_time"])
    ns.update(memory_per_rank=upstream.layout_memory_per_rank, step_time=upstream.layout_step_time)
    cl.check_best_layout(ns["best_layout"])


def test_the_notebook_and_the_checks_use_the_same_models_and_clusters():
    ns = _namespace()
    for name in ("MODEL_13B", "GPT3_175B", "NVLINK_IB", "PCIE_ETH", "SELENE"):
        assert ns[name] == getattr(cl, name), name
    assert ns["make_layout"](8, 8, 16, zero=0) == cl.make_layout(8, 8, 16, zero=0)


def test_hidden_cases_are_valid_and_the_solution_matches_the_reference():
    ns = _namespace()
    cases = cl.memory_cases(11003, n=8)
    cl.expect_all_close([ns["memory_per_rank"](*c) for c in cases], [ref.layout_memory_per_rank(*c) for c in cases],
                        [cl.describe_memory(c) for c in cases], cl.MEMORY_KEYS, rtol=1e-9)
    cases = cl.step_time_cases(11004, n=8)
    cl.expect_all_close([ns["step_time"](*c) for c in cases], [ref.layout_step_time(*c) for c in cases],
                        [cl.describe_step_time(c) for c in cases], cl.TIME_KEYS, rtol=1e-9, atol=1e-15)
    for axes in (("tp", "sp"), ("pp", "cp")):
        cases = cl.layer_comm_cases(11001, axes)
        assert {c[0] for c in cases} == set(axes)
        cl.expect_all_close([ns["layer_comm_bytes"](*c) for c in cases], [ref.layer_comm_bytes(*c) for c in cases],
                            [f"layer_comm_bytes{c}" for c in cases], rtol=1e-9, atol=1e-9)
    assert len(cl.best_layout_cases(11005, n=3)) == 3
    with pytest.raises(ValueError, match="axes"):
        cl.layer_comm_cases(1, ("dp",))


@pytest.mark.parametrize("answer, wrong, check, message", [
    ("layer_comm_bytes", "sp_same_bytes_as_tp", cl.check_layer_comm_tp_sp, r"layer_comm_bytes\('sp', 1, 2048, 5120, 8\)"),
    ("layer_comm_bytes", "cp_no_last_hop", cl.check_layer_comm_pp_cp, r"layer_comm_bytes\('cp', 1, 8192, 4096, 4\)"),
    ("memory_per_rank", "sp_flag_ignored", cl.check_memory_per_rank, "activations of GPT-3 175B with t = 8, p = 16, TP \\+ SP"),
    ("step_time", "bubble_p_slots", cl.check_step_time, "toy: bubble = \\(p - 1\\) slots"),
])
def test_a_wrong_answer_fails_with_the_case_named(answer, wrong, check, message):
    with pytest.raises(GradingError, match=message):
        check(_namespace(**{answer: wrong})[answer])


def test_a_planner_that_skips_the_memory_filter_fails():
    ns = _namespace(best_layout="memory_not_checked")
    ns.update(memory_per_rank=upstream.layout_memory_per_rank, step_time=upstream.layout_step_time)
    with pytest.raises(GradingError, match="best_layout"):
        cl.check_best_layout(ns["best_layout"])
