"""The self-check: grades with hidden tests offline, never touches the course gradebook,
and gives clear errors and exit codes for notebooks it cannot or should not accept."""
from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, solved_version

from conftest import FIXTURE, ROOT

pytestmark = pytest.mark.nbgrader


def run_check(path, course_root, *extra):
    env = {"TAS_COURSE_ROOT": str(course_root), "PATH": __import__("os").environ["PATH"]}
    proc = subprocess.run([sys.executable, "-m", "solutions_lib", "check", str(path), *extra],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return proc


@pytest.fixture
def released(fixture_course, tmp_path):
    course = Course(fixture_course)
    course.generate(FIXTURE)
    rel = course.release_notebook(FIXTURE, "exercises.ipynb")
    src = nbs.read(fixture_course / "source" / FIXTURE / "exercises.ipynb")
    work = tmp_path / "learner"
    work.mkdir()
    return fixture_course, rel, src, work


def test_full_marks_exit_0_and_gradebook_untouched(released):
    root, rel, src, work = released
    before = (root / "gradebook.db").read_bytes()
    path = work / "exercises.ipynb"
    nbformat.write(solved_version(rel, src), path)
    proc = run_check(path, root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "square_tests" in proc.stdout and "5 / 5" in proc.stdout
    assert (root / "gradebook.db").read_bytes() == before, "the self-check wrote to the course gradebook"


def test_failing_hidden_test_is_reported_with_its_message(released):
    root, rel, src, work = released
    nb = solved_version(rel, src)
    for c in nb.cells:  # passes the visible square(3) == 9, fails the hidden square(-7.5)
        if nbs.nbgrader_md(c).get("grade_id") == "square":
            c.source = "def square(x):\n    return 9 if x == 3 else 0"
    path = work / "exercises.ipynb"
    nbformat.write(nb, path)
    proc = run_check(path, root, "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    q = {x["grade_id"]: x for x in report["questions"]}
    assert q["square_tests"]["points"] == 0 and q["cube_tests"]["points"] == 3
    assert any("square(-7.5)" in m and "expected 56.25" in m for m in q["square_tests"]["messages"])
    assert report["auto_score"] == 3 and report["auto_max"] == 5 and not report["full_marks"]


def test_blank_scores_zero(released):
    root, rel, _, work = released
    path = work / "exercises.ipynb"
    nbformat.write(rel, path)
    proc = run_check(path, root)
    assert proc.returncode == 1
    assert "auto-graded: 0 / 5" in proc.stdout and "NotImplementedError" in proc.stdout


def test_renamed_edited_and_deleted_cells_are_reported(released):
    root, rel, src, work = released
    nb = solved_version(rel, src)
    nb.cells = [c for c in nb.cells if nbs.nbgrader_md(c).get("grade_id") != "cube_tests"]
    for c in nb.cells:
        if nbs.nbgrader_md(c).get("grade_id") == "square_tests":
            c.source = "pass"
    path = work / "exercises (1).ipynb"
    nbformat.write(nb, path)
    proc = run_check(path, root, "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1, "a notebook the grader would not find by name is not 'done'"
    assert report["notebook"] == "exercises.ipynb" and report["auto_score"] == 5
    text = " ".join(report["warnings"])
    assert "rename it" in text and "'square_tests' was edited" in text and "'cube_tests' was deleted" in text


@pytest.mark.parametrize("content,needle", [
    ('{"cells": [', "not valid notebook JSON"),
    ("\x89PNG\r\n", "not valid notebook JSON"),
    ('{"hello": 1}', "not a notebook"),
])
def test_unreadable_files_exit_2(released, content, needle):
    root, _, _, work = released
    path = work / "exercises.ipynb"
    path.write_text(content)
    proc = run_check(path, root)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def test_foreign_notebook_exit_2(released):
    root, _, _, work = released
    path = work / "mine.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")]), path)
    proc = run_check(path, root)
    assert proc.returncode == 2 and "not one of this course's notebooks" in proc.stderr
