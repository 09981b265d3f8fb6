"""Same-kernel tampering: values read through the base types, and check records that the
grader re-checks outside the kernel (solutions_lib/course/integrity.py).

The class of tampering submissions is graded by one stock `nbgrader autograde` batch. Each
one would have scored full marks before the records existed (the tampered cells raised no
error); now the tampered test cells score zero and are listed in the grade report. The
grader's rule itself (trusted run, withheld references) is proven in test_grading_contract.py."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, read_results, solved_version
from solutions_lib.course.integrity import METADATA_KEY, calls_a_check, insert_verifier
from solutions_lib.grading import RECORD_MIME, GradingError, expect_close, expect_equal, expect_true, plain

from conftest import FIXTURE


# ---------------------------------------------------------------- lying values, in this process


class LyingInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__

    def __int__(self):
        return 42

    def __index__(self):
        return 42


class LyingFloat(float):
    def __float__(self):
        return 9.0

    def __sub__(self, other):
        return 0.0


class LyingTuple(tuple):
    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__

    def __iter__(self):
        return iter((4, 4))


class LyingArray(np.ndarray):
    def __sub__(self, other):
        return np.zeros(self.shape)

    def __array__(self, dtype=None, copy=None):
        return np.full(self.shape, 9.0)


class LyingTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        return torch.full_like(out, 9.0) if isinstance(out, torch.Tensor) and out.is_floating_point() else out


def test_plain_reads_what_a_value_holds_not_what_it_says():
    assert plain(LyingInt(7)) == 7 and type(plain(LyingInt(7))) is int
    assert plain(LyingFloat(1.5)) == 1.5 and type(plain(LyingFloat(1.5))) is float
    assert plain(LyingTuple((1, 2))) == (1, 2)
    assert plain(np.int64(3)) == 3 and type(plain(np.int64(3))) is int
    assert plain(np.array(2.5)) == 2.5
    assert plain({"a": [np.float32(0.5), LyingInt(1)]}) == {"a": [0.5, 1]}
    assert plain(torch.Size([2, 3])) == (2, 3)


@pytest.mark.parametrize("got", [LyingInt(7), LyingTuple((1, 2)), "4"], ids=["int", "tuple", "str"])
def test_expect_equal_is_not_fooled_by_a_lying_eq(got):
    expected = {LyingInt: 4, LyingTuple: (4, 4), str: 4}[type(got)]
    with pytest.raises(GradingError, match="expected"):
        expect_equal(got, expected, "the answer")


def test_expect_equal_still_accepts_numpy_ints_and_shapes():
    expect_equal(np.int64(3), 3, "n")
    expect_equal(torch.Size([2, 3]), (2, 3), "shape")
    with pytest.raises(GradingError):
        expect_equal(True, 1, "a bool is not the int it stands for")
    with pytest.raises(GradingError):
        expect_equal(2.0, 2, "a float is not an int")


def test_expect_close_reads_subclasses_as_their_base_type():
    with pytest.raises(GradingError, match="expected 9"):
        expect_close(LyingFloat(1.5), 9.0, "float subclass")
    arr = np.arange(3.0).view(LyingArray)
    with pytest.raises(GradingError, match="differ"):
        expect_close(arr, np.full(3, 9.0), "ndarray subclass")
    t = torch.arange(3.0).as_subclass(LyingTensor)
    with pytest.raises(GradingError, match="differ"):
        expect_close(t, np.full(3, 9.0), "tensor subclass")
    expect_close(torch.arange(3.0).as_subclass(LyingTensor), np.arange(3.0), "its real values pass")


def test_expect_true_reads_tensors_and_numpy_bools():
    expect_true(np.bool_(True), "numpy bool")
    expect_true(torch.tensor(True), "tensor bool")
    with pytest.raises(GradingError, match="tensor false"):
        expect_true(torch.tensor(0.0), "tensor false")


# ---------------------------------------------------------------- the grader's decision


def test_verifier_sits_after_the_metadata_is_cleared_and_before_grades_are_saved():
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import SaveAutoGrades

    out = insert_verifier(list(Autograde.class_traits()["autograde_preprocessors"].default()))
    names = [p.__name__ for p in out]
    i = names.index("DecideTestCells")
    assert out[i - 1] is ClearMetadataPreprocessor and names.index("SaveAutoGrades") > i
    assert insert_verifier(out) == out  # idempotent
    assert SaveAutoGrades in out
    assert calls_a_check("expect_close(f(1), 2, 'x')") and not calls_a_check("# expect_close(f(1), 2, 'old')\nx = 1")


# ---------------------------------------------------------------- a tampering class under stock autograde

WRONG_SQUARE = "\ndef square(x):\n    return 0\n"

# student -> (code prepended to the `square` answer, code appended to it, expected exercises points)
TAMPERING = {
    # every later cell that checks something is emptied before it runs
    "empties_test_cells": ("get_ipython().input_transformers_cleanup.append(\n"
                           "    lambda lines: [] if any('expect_' in l for l in lines) else lines)", WRONG_SQUARE, 0.0),
    # the course's own check replaced by a no-op
    "patches_grading": ("import solutions_lib.grading as g\ng.expect_close = lambda *a, **k: None", WRONG_SQUARE, 0.0),
    # numpy patched so that every difference is zero: cube (right) keeps its 3 points
    "patches_numpy": ("import numpy as np\nnp.abs = lambda x: np.zeros_like(x)", WRONG_SQUARE, 3.0),
    # every later cell wrapped in try/except: the failing check is silenced; cube (right)
    # keeps its 3 points
    "swallows_errors": ("get_ipython().input_transformers_cleanup.append(lambda lines: ['try:\\n']\n"
                        "    + ['    ' + l for l in lines] + ['\\nexcept Exception:\\n    pass\\n'])",
                        WRONG_SQUARE, 3.0),
}


@pytest.mark.nbgrader
def test_tampering_class_scores_what_it_deserves_and_is_flagged(fixture_course, monkeypatch):
    """With every test cell run in the kernel (TAS_GRADER_SIDE=off: what beside cells get), the
    tamperers lose the cells they touched and are flagged; grader-side, see the next test."""
    from solutions_lib.course.report import write_report

    monkeypatch.setenv("TAS_GRADER_SIDE", "off")
    root = fixture_course
    course = Course(root)
    course.generate(FIXTURE)
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    solved = {n: solved_version(rel[n], nbs.read(root / "source" / FIXTURE / n)) for n in rel}

    def tampered(before, after):
        sub = {n: nbformat.from_dict(json.loads(json.dumps(nb))) for n, nb in solved.items()}
        cell = next(c for c in sub["exercises.ipynb"].cells if nbs.nbgrader_md(c).get("grade_id") == "square")
        cell.source = before + "\n" + cell.source + after
        return sub

    course.submit("good", FIXTURE, solved)
    course.submit("wrong", FIXTURE, tampered("", WRONG_SQUARE))
    for student, (before, after, _) in TAMPERING.items():
        course.submit(student, FIXTURE, tampered(before, after))
    proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", FIXTURE, "--force"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]

    def points(student):
        return {n.name: n.score("tests") for n in read_results(root, FIXTURE, student).notebooks}

    assert points("good") == {"exercises.ipynb": 5.0, "theory.ipynb": 1.0}, log[-3000:]
    assert points("wrong") == {"exercises.ipynb": 3.0, "theory.ipynb": 1.0}
    for student, (_, _, expected) in TAMPERING.items():
        assert points(student) == {"exercises.ipynb": expected, "theory.ipynb": 1.0}, student
        graded = nbformat.read(root / "autograded" / student / FIXTURE / "exercises.ipynb", as_version=4)
        marked = {nbs.nbgrader_md(c)["grade_id"] for c in graded.cells if c.metadata.get(METADATA_KEY)}
        assert "square_tests" in marked, (student, marked)
    good = nbformat.read(root / "autograded" / "good" / FIXTURE / "exercises.ipynb", as_version=4)
    assert not any(c.metadata.get(METADATA_KEY) for c in good.cells)
    # the grader consumed the records: none is left in the autograded notebook
    assert not any(RECORD_MIME in o.get("data", {}) for c in good.cells for o in c.get("outputs", []))

    rep = write_report(root)
    del rep
    flags = (root / "flags.csv").read_text()
    for student in TAMPERING:
        assert f"{student},{FIXTURE},exercises.ipynb,square_tests,0,check_records" in flags, flags
    assert "good," not in flags and "wrong," not in flags

    # the records (they hold the hidden tests' expected values) stay out of the feedback
    assert course.api.generate_feedback(FIXTURE, "good", force=True)["success"]
    html = (root / "feedback" / "good" / FIXTURE / "exercises.html").read_text()
    assert "vnd.tas.check" not in html and "square(-7.5)" not in html


#: Attacks on a grader-side test cell: the kernel never runs it, so it can only answer the
#: grader's requests (student -> code prepended to the `square` answer).
GRADER_SIDE_ATTACKS = dict({k: (b, a, 3.0) for k, (b, a, _) in TAMPERING.items()}, **{
    # publish passing records from the kernel whenever any code runs there
    "publishes_records": ("from IPython.display import publish_display_data as _p\n"
                          "from solutions_lib.grading import RECORD_MIME as _M\n"
                          "get_ipython().events.register('post_run_cell', lambda *a: [_p({_M: {'kind': 'close', "
                          "'what': w, 'got': [9.0], 'expected': [9.0]}}) for w in ('square(3)', 'square(-7.5)')])", WRONG_SQUARE, 3.0),
    # the kernel's end of the requests replaced: every request gets the answer 56.25 (the
    # kernel no longer answers the grader: both cells fail)
    "forges_replies": ("import solutions_lib._remote as _r\n"
                       "_orig = _r.serve\n"
                       "def _serve(b64):\n"
                       "    from IPython.display import publish_display_data\n"
                       "    publish_display_data({_r.MIME: {'ok': _r.encode(56.25)}})\n"
                       "_r.serve = _serve", "", 0.0),
    # every cell's history (In), XOR-ed with a key and printed as hex after each cell: no screen
    # can stop that, so the hidden test lines must never be in the kernel (issue 26, attack 5)
    "xor_history": ("get_ipython().events.register('post_run_cell', lambda *a: print('XOR:' + bytes(\n"
                    "    b ^ 0x5A for b in '\\n'.join(In).encode()).hex()))", WRONG_SQUARE, 3.0),
    # the answer reads the expected value from the caller's frames (none exist in the kernel)
    "reads_frames": ("import sys as _s\n", "\ndef square(x):\n    f = _s._getframe(1)\n"
                     "    return f.f_locals.get('expected', 0)\n", 3.0),
})


@pytest.mark.nbgrader
def test_grader_side_cells_are_out_of_the_kernels_reach(fixture_course):
    """Grader-side (the default): the test cells never reach the kernel, so no tampering in the
    kernel changes their score: each attacker keeps cube (right, 3 points) and loses square
    (wrong, or forged), and the cells are marked as evaluated by the grader."""
    root = fixture_course
    course = Course(root)
    course.generate(FIXTURE)
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    solved = {n: solved_version(rel[n], nbs.read(root / "source" / FIXTURE / n)) for n in rel}

    def tampered(before, after):
        sub = {n: nbformat.from_dict(json.loads(json.dumps(nb))) for n, nb in solved.items()}
        cell = next(c for c in sub["exercises.ipynb"].cells if nbs.nbgrader_md(c).get("grade_id") == "square")
        cell.source = before + "\n" + cell.source + after
        return sub

    course.submit("good", FIXTURE, solved)
    for student, (before, after, _) in GRADER_SIDE_ATTACKS.items():
        course.submit(student, FIXTURE, tampered(before, after))
    proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", FIXTURE, "--force"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]

    def points(student):
        return {n.name: n.score("tests") for n in read_results(root, FIXTURE, student).notebooks}

    assert points("good") == {"exercises.ipynb": 5.0, "theory.ipynb": 1.0}, log[-3000:]
    good = nbformat.read(root / "autograded" / "good" / FIXTURE / "exercises.ipynb", as_version=4)
    assert {nbs.nbgrader_md(c)["grade_id"] for c in good.cells if c.metadata.get("tas_evaluated") == "grader"} == \
        {"square_tests", "cube_tests"}
    for student, (_, _, expected) in GRADER_SIDE_ATTACKS.items():
        assert points(student) == {"exercises.ipynb": expected, "theory.ipynb": 1.0}, student
    graded = nbformat.read(root / "autograded" / "xor_history" / FIXTURE / "exercises.ipynb", as_version=4)
    dumps = [line[4:] for c in graded.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"
             for line in o.get("text", "").splitlines() if line.startswith("XOR:")]
    assert dumps, "the history printer ran"
    decoded = "\n".join(bytes(b ^ 0x5A for b in bytes.fromhex(d)).decode() for d in dumps)
    assert "def square" in decoded and "hidden test" not in decoded and "cube(-3)" not in decoded


@pytest.mark.parametrize("rank,peers", [(1, ""), (0, "\n(ranks [1, 2] failed after it)")])
def test_a_failed_rank_puts_its_own_error_first(rank, peers):
    import nbformat

    from solutions_lib.course.integrity import explain_errors

    cell = nbformat.v4.new_code_cell("launch_graded(check, 2)")
    cell.outputs = [nbformat.v4.new_output("error", ename="LaunchError", evalue=(
        f"rank {rank} failed:\nTraceback (most recent call last):\n  File \"x.py\", line 3, in f\n"
        f"    raise NotImplementedError()\nNotImplementedError{peers}"), traceback=[])]
    explain_errors(cell)
    first = cell.outputs[0]["evalue"].splitlines()[0]
    assert first.startswith(f"rank {rank} failed with NotImplementedError") and "replace the `raise NotImplementedError()`" in first
