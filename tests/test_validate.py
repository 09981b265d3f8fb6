"""Validate tells the truth (issue 25): `nbgrader validate` in the course root, with bubblewrap
present, runs the student's own kernel with the real package, never the grading sandbox or the
view with the references withheld. A solved notebook whose visible tests compare with
references (05 exercises: the alpha-beta fit on the student's own measurement) must validate.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import solved_version
from solutions_lib.course.sandbox import sandbox_available

ROOT = Path(__file__).resolve().parents[1]
NB = ("05_communication", "exercises.ipynb")



def _validate(path: Path) -> str:
    import os
    env = {k: v for k, v in os.environ.items() if k != "TAS_SANDBOX"}   # the default: on
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    p = subprocess.run([nbgrader, "validate", str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    return p.stdout + p.stderr


@pytest.mark.skipif(not sandbox_available()[0], reason="bubblewrap cannot run here: the case the issue is about")
def test_solved_notebook_validates_in_the_course_root_with_bubblewrap(tmp_path):
    a, n = NB
    solved = solved_version(nbformat.read(ROOT / "release" / a / n, as_version=4), nbs.read(ROOT / "source" / a / n))
    path = tmp_path / a / n
    path.parent.mkdir(parents=True)
    nbformat.write(solved, path)
    out = _validate(path)
    assert "Success! Your notebook passes all the tests." in out, out[-3000:]
    blank = tmp_path / a / "blank.ipynb"
    nbformat.write(nbformat.read(ROOT / "release" / a / n, as_version=4), blank)
    assert "VALIDATION FAILED" in _validate(blank)
