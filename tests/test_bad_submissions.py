"""A class of bad submissions graded in one stock `nbgrader autograde` batch: each gets a
deliberate score (or is reported as failed), the batch goes on, the good scores stand."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, read_results, solved_version

from conftest import FIXTURE

pytestmark = pytest.mark.nbgrader


def _answer(nb, gid):
    return next(c for c in nb.cells if nbs.nbgrader_md(c).get("grade_id") == gid)


def _class(course: Course, root: Path) -> dict[str, dict[str, object]]:
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    src = {n: nbs.read(root / "source" / FIXTURE / n) for n in rel}
    solved = {n: solved_version(rel[n], src[n]) for n in rel}

    def variant(edit, name="exercises.ipynb"):
        nbsub = {n: nbformat.from_dict(json.loads(json.dumps(nb))) for n, nb in solved.items()}
        edit(nbsub[name])
        return nbsub

    def prepend(gid, code):
        return lambda nb: setattr(_answer(nb, gid), "source", code + "\n" + _answer(nb, gid).source)

    return {
        "good": solved,
        "loop": variant(prepend("square", "while True:\n    pass")),
        "sysexit": variant(prepend("square", "import sys\nsys.exit(0)")),
        "osexit": variant(prepend("double", "import os\nos._exit(1)"), "theory.ipynb"),
        "edited": variant(lambda nb: setattr(_answer(nb, "square_tests"), "source", "pass  # tests removed")),
        "deleted": variant(lambda nb: nb.cells.remove(_answer(nb, "cube_tests"))),
        "malformed": dict(solved, **{"exercises.ipynb": '{"cells": [ {"cell_type": '}),
        "blank": rel,
    }


def test_bad_submissions_get_deliberate_scores_and_batch_goes_on(fixture_course):
    course = Course(fixture_course, cell_timeout=5)
    course.generate(FIXTURE)
    for student, files in _class(course, fixture_course).items():
        course.submit(student, FIXTURE, files)
    # one stock batch for the whole class, as an instructor runs it
    proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", FIXTURE, "--force"],
                          cwd=fixture_course, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, "nbgrader should report the failed submissions"
    for failed in ("osexit", "malformed"):
        assert f"for student '{failed}'" in log

    def auto(student):
        r = read_results(fixture_course, FIXTURE, student)
        return {n.name: (n.status, n.score("tests")) for n in r.notebooks}

    full = {"exercises.ipynb": ("graded", 5.0), "theory.ipynb": ("graded", 1.0)}
    assert auto("good") == full
    assert auto("edited") == full, "an edited test cell is replaced by the original"
    assert auto("deleted") == full, "a deleted test cell is put back (add_missing_cells)"
    # the answer cell never defined square(): its test scores 0, cube's 3 points stand
    assert auto("loop") == {"exercises.ipynb": ("graded", 3.0), "theory.ipynb": ("graded", 1.0)}
    assert auto("sysexit") == {"exercises.ipynb": ("graded", 3.0), "theory.ipynb": ("graded", 1.0)}
    assert auto("blank") == {"exercises.ipynb": ("graded", 0.0), "theory.ipynb": ("graded", 0.0)}
    # a dead kernel or an unreadable file: reported as failed, never as a quiet zero
    assert {s for s, _ in auto("osexit").values()} == {"failed"}
    assert {s for s, _ in auto("malformed").values()} == {"failed"}
    loop = read_results(fixture_course, FIXTURE, "loop").notebooks[0]
    square = next(c for c in loop.cells if c.grade_id == "square_tests")
    assert any("NameError" in m for m in square.messages)
    graded_loop = nbformat.read(fixture_course / "autograded" / "loop" / FIXTURE / "exercises.ipynb", as_version=4)
    assert any(o.get("ename") == "CellTimeoutError" for c in graded_loop.cells for o in c.get("outputs", []))
