"""Feedback without leaks: stock `nbgrader generate_feedback`, configured by the course config,
shows the student's failure message and the visible tests, never the hidden tests' source or
a traceback that quotes it."""
from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.feedback import HideHiddenTests, final_error, hide_regions
from solutions_lib.course.grader import Course

from conftest import ROOT

A = "00_feedback"
HIDDEN = (
    "_probe_seed_4471 = 4471\n"
    "x_hidden_probe = -2.5 + 0 * _probe_seed_4471\n"
    "expect_close(triple(x_hidden_probe), -7.5, 'triple at a fresh input', hint='multiply every x by 3')\n"
)
SECRETS = ["_probe_seed_4471", "x_hidden_probe", "expect_close(triple(x_hidden_probe)", "HIDDEN TESTS"]


def _course(root: Path) -> Path:
    nb = nbs.new_notebook([
        nbs.markdown("# Feedback fixture", locked=True),
        nbs.answer("triple", "def triple(x):\n    ### BEGIN SOLUTION\n    return 3 * x\n    ### END SOLUTION"),
        nbs.tests("triple_tests",
                  "from solutions_lib.grading import expect_close\n"
                  "expect_close(triple(3), 9, 'visible check triple(3)')\n"
                  "### BEGIN HIDDEN TESTS\n" + HIDDEN + "### END HIDDEN TESTS", 2, ["TSX-01"]),
    ])
    (root / "source" / A).mkdir(parents=True)
    nbs.write(nbs.normalise(nb), root / "source" / A / "fb.ipynb")
    (root / "nbgrader_config.py").write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from solutions_lib.course.config import apply_course_config\n"
        "apply_course_config(get_config(), root=os.path.dirname(os.path.abspath(__file__)), cell_timeout=10)\n")
    return root


def _text(path: Path) -> str:
    """The feedback HTML as a reader sees it: tags stripped, entities decoded, ANSI codes removed."""
    raw = path.read_text(encoding="utf-8")
    raw = re.sub(r"<style.*?</style>|<script.*?</script>", "", raw, flags=re.S)
    return re.sub(r"\x1b\[[0-9;]*m", "", html.unescape(re.sub(r"<[^>]+>", "", raw)))


@pytest.mark.nbgrader
def test_stock_generate_feedback_hides_hidden_tests(tmp_path):
    root = _course(tmp_path / "course")
    course = Course(root)
    course.generate(A)
    rel = course.release_notebook(A, "fb.ipynb")
    answer = next(c for c in rel.cells if nbs.nbgrader_md(c).get("grade_id") == "triple")
    answer.source = "def triple(x):\n    return 9 if x == 3 else 0  # passes the visible test only"
    course.submit("s_hardcoded", A, {"fb.ipynb": rel})
    assert course.autograde(A, "s_hardcoded")["success"]
    graded = nbformat.read(root / "autograded" / "s_hardcoded" / A / "fb.ipynb", as_version=4)
    assert any("x_hidden_probe" in c.source for c in graded.cells), "the autograded copy keeps the hidden tests"

    proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "generate_feedback", A, "--force"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = _text(root / "feedback" / "s_hardcoded" / A / "fb.html")
    assert "triple at a fresh input: expected -7.5, got 0" in text, text  # the student's failure message
    assert "multiply every x by 3" in text
    assert "GradingError" in text
    assert "visible check triple(3)" in text  # visible tests still shown
    assert "hidden tests: 3 lines (run at grading time)" in text
    for secret in SECRETS:
        assert secret not in text, secret
    for frame in ("Traceback", "---->", "Cell In[", "grading.py"):
        assert frame not in text, frame
    assert "Score: 0" in text


def test_hide_regions_and_error_reduction():
    src = "a = 1\n    ### BEGIN HIDDEN TESTS\n    secret_line_number_one = 2\n\n    ### END HIDDEN TESTS\nb = 2"
    out, hidden = hide_regions(src, "# hidden tests: {n} lines")
    assert out == "a = 1\n    # hidden tests: 1 lines\nb = 2"
    assert hidden == ["    secret_line_number_one = 2", ""]
    # an unterminated region hides everything after BEGIN
    out, _ = hide_regions("x\n### BEGIN HIDDEN TESTS\nsecret_value = 1", "# hidden {n}")
    assert out == "x\n# hidden 1"
    err = nbformat.from_dict({"output_type": "error", "ename": "GradingError", "evalue": "f(2): expected 4, got 5.",
                              "traceback": ["Traceback ...", "----> 3 expect_close(f(secret_input_value))"]})
    assert final_error(err, hidden)["traceback"] == ["GradingError: f(2): expected 4, got 5."]
    quoting = dict(err, evalue="bad: secret_line_number_one = 2")
    assert final_error(nbformat.from_dict(quoting), hidden)["evalue"].startswith("(message withheld")
    timeout = dict(err, ename="CellTimeoutError",
                   evalue="A cell timed out.\nHere is a preview of the cell contents:\n---\nsecret_value = 1")
    assert "secret_value" not in final_error(nbformat.from_dict(timeout), [])["traceback"][0]


def test_non_test_cells_untouched():
    cell = nbs.answer("f", "def f():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION")
    cell.outputs = [nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": "hi"})]
    before = nbformat.writes(nbs.new_notebook([cell]))
    out, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert nbformat.writes(nbs.new_notebook([out])) == before
