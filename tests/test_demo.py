"""The main job on the fixture course: stock nbgrader commands end to end (generate, autograde,
feedback, export) and a table that shows a crashed notebook as failed, not as 0."""
from __future__ import annotations

import csv

import pytest

from solutions_lib.course import demo

from conftest import FIXTURE

pytestmark = pytest.mark.nbgrader


def test_demo_grades_sample_class_and_reports_failures(fixture_course, capsys):
    assert demo.main(fixture_course) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("s0")}
    assert "6/6" in rows["s01_solved"] and "+1 to grade by hand" in rows["s01_solved"]
    assert "0/6" in rows["s02_blank"]
    assert "failed: exercises" in rows["s04_crash"], out
    # the crash killed exercises.ipynb only; theory was re-graded on its own
    assert "1/6" in rows["s04_crash"]
    assert (fixture_course / "feedback" / "s01_solved" / FIXTURE / "exercises.html").exists()
    with open(fixture_course / "grades.csv") as f:
        grades = {r["student_id"]: r for r in csv.DictReader(f)}
    assert set(demo.STUDENTS) <= set(grades)
