"""The student edition (issue 25): a wheel with no reference answer in its files, whose solved
release notebooks pass their visible tests and `nbgrader validate` with the references absent.

The suite builds the wheel with the visible values of one assignment (05_communication, whose
visible tests compare with references 19 times, one of them on the student's own measurement)
and validates its two notebooks in a fresh venv; `python -m solutions_lib bench studentkit`
does every assignment."""
from __future__ import annotations

import zipfile
from pathlib import Path

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import solved_version
from solutions_lib.course.student_kit import build, kit_venv, validate_in, withheld_lines
from solutions_lib.course.withheld_view import WITHHELD

ROOT = Path(__file__).resolve().parents[1]
A = "05_communication"

pytestmark = pytest.mark.xdist_group("student_kit")


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    d = tmp_path_factory.mktemp("kit")
    wheel = build(d / "dist", assignments=[A], root=ROOT, out=lambda *_: None)
    return wheel, kit_venv(wheel, d / "venv")


def test_no_withheld_answer_is_in_the_wheel(kit):
    import json
    wheel, _ = kit
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        table = json.loads(z.read(f"solutions_lib/_visible/{A}.json"))
        # the course's copies of earlier answers (upstream.py) are the documented exception
        text = "\n".join(z.read(n).decode("utf-8", "replace") for n in names if not n.endswith("/upstream.py"))
    assert sum(map(len, table.values())) >= 10, "the visible reference checks' values are in the kit"
    assert not any("/course/" in n for n in names), "the grading pipeline is not for students"
    lines = withheld_lines()
    assert set(lines) == {f"{m}.{n}" for m, ns in WITHHELD.items() for n in ns}
    assert sum(map(len, lines.values())) > 1000          # the check has something to find
    leaked = sorted(f"{k}: {ln}" for k, v in lines.items() for ln in v if ln in text)
    assert not leaked, "\n".join(leaked[:20])


def test_using_an_answer_says_it_is_not_in_the_student_edition(kit):
    import subprocess
    _, py = kit
    code = ("import solutions_lib.optim as o, solutions_lib.comms as c\n"
            "from solutions_lib.withheld import WithheldError\n"
            "for f in (lambda: float(o.adamw_step(1.0, 0.1, 0.0, 0.0, 1, 1e-3)[0]), lambda: bool(c.ring_allreduce_time(4, 1e6, 1e-6, 1e9) > 1)):\n"
            "    try:\n        f()\n    except WithheldError as e:\n        print('ERR', e)\n"
            "import solutions_lib.dist.launch, solutions_lib.models, solutions_lib.grading  # the kit imports\n")
    p = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("not in the student edition") == 2, p.stdout + p.stderr


@pytest.mark.parametrize("name", ["exercises.ipynb", "theory.ipynb"])
def test_solved_release_notebook_validates_with_the_student_edition(kit, tmp_path, name):
    _, py = kit
    release = nbformat.read(ROOT / "release" / A / name, as_version=4)
    path = tmp_path / A / name
    path.parent.mkdir(parents=True)
    nbformat.write(solved_version(release, nbs.read(ROOT / "source" / A / name)), path)
    ok, out = validate_in(py, path)
    assert ok, out[-4000:]
    nbformat.write(release, path)
    ok, out = validate_in(py, path)
    assert not ok and "VALIDATION FAILED" in out
    assert "WithheldError" not in out and "withheld" not in out.lower(), out[-3000:]
