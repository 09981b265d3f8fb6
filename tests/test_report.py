"""The grade report: per-question rows that tell a crash from a zero, a per-student summary,
and the scanner's flags, read from a real gradebook after stock autograde."""
from __future__ import annotations

import csv
import json

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, solved_version
from solutions_lib.course.report import write_report

from conftest import FIXTURE

pytestmark = pytest.mark.nbgrader


def _answer(nb, gid):
    return next(c for c in nb.cells if nbs.nbgrader_md(c).get("grade_id") == gid)


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_report_rows_for_solved_blank_crashed_flagged_and_missing(fixture_course):
    course = Course(fixture_course, cell_timeout=5)
    course.generate(FIXTURE)
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    src = {n: nbs.read(fixture_course / "source" / FIXTURE / n) for n in rel}
    solved = {n: solved_version(rel[n], src[n]) for n in rel}

    def copy():
        return {n: nbformat.from_dict(json.loads(json.dumps(nb))) for n, nb in solved.items()}

    crashed, flagged = copy(), copy()
    _answer(crashed["exercises.ipynb"], "square").source += "\nimport os\nos._exit(1)"
    _answer(flagged["theory.ipynb"], "double").source += "\nget_ipython().events.register('post_run_cell', print)"
    for student, files in {"solved": solved, "blank": rel, "crashed": crashed, "flagged": flagged}.items():
        course.submit(student, FIXTURE, files)
        course.autograde(FIXTURE, student)

    rep = write_report(fixture_course, students=["solved", "blank", "crashed", "flagged", "absent"])
    q = {(r["student"], r["grade_id"]): r for r in _read(fixture_course / "grades_by_question.csv")}
    s = {r["student"]: r for r in _read(fixture_course / "grades_by_student.csv")}
    flags = _read(fixture_course / "flags.csv")

    assert q["solved", "square_tests"] == dict(q["solved", "square_tests"], points="2", max_points="2",
                                               status="graded", flags="")
    assert q["solved", "why"]["status"] == "needs_manual_grade" and q["solved", "why"]["points"] == ""
    assert q["blank", "square_tests"]["points"] == "0" and q["blank", "square_tests"]["status"] == "graded"
    # a dead kernel: failed_to_run with no points, never a 0
    for gid in ("square_tests", "cube_tests", "why", "double_tests"):
        assert q["crashed", gid]["status"] == "failed_to_run" and q["crashed", gid]["points"] == "", gid
    assert q["absent", "double_tests"]["status"] == "missing"
    assert q["flagged", "double_tests"]["points"] == "1" and q["flagged", "double_tests"]["flags"] == "ipython_hook"
    assert q["flagged", "square_tests"]["flags"] == ""  # flags are per notebook

    assert (s["solved"]["status"], s["solved"]["points"], s["solved"]["max_points"]) == ("graded", "6", "6")
    assert s["solved"]["manual_pending_points"] == "1"
    assert (s["blank"]["status"], s["blank"]["points"]) == ("graded", "0")
    assert (s["crashed"]["status"], s["crashed"]["points"]) == ("failed_to_run", "")
    assert s["crashed"]["failed_to_run"] == "exercises.ipynb;theory.ipynb"
    assert s["absent"]["status"] == "missing"
    assert (s["flagged"]["flags"], s["flagged"]["flag_rules"]) == ("1", "ipython_hook")
    # how the kernels ran (issue 26): the suite grades in the sandbox where it can run, else opted out
    import os
    expect = "plain kernel (TAS_SANDBOX=off)" if os.environ.get("TAS_SANDBOX") == "off" else "sandbox"
    assert s["solved"]["graded_in"] == expect and s["crashed"]["graded_in"] == ""

    by_student = {}
    for f in flags:
        by_student.setdefault(f["student"], set()).add((f["notebook"], f["cell"], f["rule"]))
    assert by_student == {"crashed": {("exercises.ipynb", "square", "process_exit")},
                          "flagged": {("theory.ipynb", "double", "ipython_hook")}}
    assert rep.flagged() == {"crashed": {"process_exit"}, "flagged": {"ipython_hook"}}


def test_report_survives_hostile_and_broken_notebooks(fixture_course):
    """One student's broken autograded copy, hostile submitted notebooks and an undecodable
    folder name are reported as such; the rest of the class is still reported."""
    import os
    import shutil

    course = Course(fixture_course, cell_timeout=5)
    course.generate(FIXTURE)
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    src = {n: nbs.read(fixture_course / "source" / FIXTURE / n) for n in rel}
    course.submit("solved", FIXTURE, {n: solved_version(rel[n], src[n]) for n in rel})
    course.autograde(FIXTURE, "solved")

    sub, ag = fixture_course / "submitted", fixture_course / "autograded"
    shutil.copytree(sub / "solved", sub / "broken")
    shutil.copytree(ag / "solved", ag / "broken")
    (ag / "broken" / FIXTURE / "exercises.ipynb").write_text('{"cells": [')  # a truncated autograded copy
    hostile = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {"nbgrader": "x"}, "outputs": [], "source": "x = " + "+".join("1" * 5000)},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": "import os\nos._exit(0)  # \ud800\x1b[2J"},
        [1, 2]]}
    (sub / "hostile" / FIXTURE).mkdir(parents=True)
    (sub / "hostile" / FIXTURE / "exercises.ipynb").write_text(json.dumps(hostile))
    (sub / "hostile" / FIXTURE / "theory.ipynb").write_text("[" * 100_000)
    odd = os.fsencode(sub) + b"/odd\xff"
    os.makedirs(odd + os.fsencode(f"/{FIXTURE}"))
    shutil.copy(sub / "solved" / FIXTURE / "theory.ipynb", os.fsdecode(odd + os.fsencode(f"/{FIXTURE}/theory.ipynb")))

    write_report(fixture_course)  # every student found under submitted/
    s = {r["student"]: r for r in _read(fixture_course / "grades_by_student.csv")}
    q = {(r["student"], r["grade_id"]): r for r in _read(fixture_course / "grades_by_question.csv")}
    flags = _read(fixture_course / "flags.csv")
    assert (s["solved"]["status"], s["solved"]["points"]) == ("graded", "6")
    assert s["broken"]["status"] == "failed_to_run" and s["broken"]["points"] == ""
    assert "the results cannot be read" in q["broken", "square_tests"]["detail"]
    assert s["hostile"]["status"] == "failed_to_run"
    assert s["odd\\udcff"]["status"] == "failed_to_run"  # the undecodable byte, escaped
    hostile_flags = {(f["notebook"], f["rule"]) for f in flags if f["student"] == "hostile"}
    assert {("exercises.ipynb", "unreadable"), ("exercises.ipynb", "process_exit"),
            ("theory.ipynb", "unreadable")} <= hostile_flags
    assert all(f["snippet"].startswith("cannot analyse: ") for f in flags if f["rule"] == "unreadable")
    assert not any("\x1b" in f["snippet"] for f in flags)
