"""The grading contract (shared DESIGN.md), proven with stock `nbgrader autograde` in a course
root with the default configuration (sandbox on, references withheld, the grader's own rule).

One small assignment, `01_contract`: a calculator answer (`ring_time`, checked against the
withheld reference `solutions_lib.comms.ring_allreduce_time`) and a build-it answer
(`softmax_rows`, which must not call torch's softmax). A class of students, each one attack of
issue 14 classes 1-2 (points without an answer, forged records, peeking at the expected value,
delegating from a background thread) or one harmless habit of an honest student (a warning on
stderr), is graded in one batch. Each scores exactly what it deserves; tampering is flagged.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, read_results
from solutions_lib.course.integrity import METADATA_KEY, decide, match, normalise_outputs, verify
from solutions_lib.course.sandbox import sandbox_available
from solutions_lib.grading import RECORD_MIME

from conftest import ROOT

A = "01_contract"
_ok, _why = sandbox_available()

RING = ("def ring_time(n, nbytes, alpha, bandwidth):\n"
        "    ### BEGIN SOLUTION\n"
        "    if n < 1:\n"
        "        raise ValueError(f'n must be >= 1, got {n}')\n"
        "    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / bandwidth\n"
        "    ### END SOLUTION")
RING_TESTS = ("import numpy as np\n"
              "import solutions_lib.comms as ref\n"
              "from solutions_lib.grading import expect_close\n"
              "expect_close(ring_time(2, 1e6, 0.0, 1e9), ref.ring_allreduce_time(2, 1e6, 0.0, 1e9), 'ring_time(2, 1 MB)')\n"
              "### BEGIN HIDDEN TESTS\n"
              "rng = np.random.default_rng(5)\n"
              "cases = [(int(rng.integers(2, 64)), float(10 ** rng.uniform(3, 9)), float(10 ** rng.uniform(-6, -4)),\n"
              "          float(10 ** rng.uniform(9, 11))) for _ in range(5)]\n"
              "expected = [ref.ring_allreduce_time(*c) for c in cases]\n"
              "from solutions_lib import upstream\n"
              "from solutions_lib.grading import no_delegation\n"
              "with no_delegation('ring_time', ref, *upstream.forbidden_except()):\n"
              "    got = [ring_time(*c) for c in cases]\n"
              "for c, g, e in zip(cases, got, expected):\n"
              "    expect_close(g, e, f'ring_time{c}', rtol=1e-9)\n"
              "### END HIDDEN TESTS")
RING_VALIDATION = ("from solutions_lib.grading import expect_accepts, expect_raises\n"
                   "expect_raises(lambda: ring_time(0, 1e6, 0.0, 1e9), ValueError, 'ring_time with n = 0')\n"
                   "expect_accepts(lambda: ring_time(1, 1e6, 0.0, 1e9), 'ring_time with n = 1')")
RING_RANGE = ("from solutions_lib.grading import expect_between\n"
              "expect_between(ring_time(4, 1e6, 1e-5, 1e9), 1e-3, 2e-3, 'ring_time(4, 1 MB, 10 us, 1 GB/s) in [1, 2] ms')")
SOFTMAX = ("import numpy as np\n\n"
           "def softmax_rows(x):\n"
           "    ### BEGIN SOLUTION\n"
           "    x = np.asarray(x, dtype=float)\n"
           "    z = np.exp(x - x.max(axis=1, keepdims=True))\n"
           "    return z / z.sum(axis=1, keepdims=True)\n"
           "    ### END SOLUTION")
SOFTMAX_TESTS = ("import numpy as np\n"
                 "import torch\n"
                 "from solutions_lib.grading import expect_close, no_delegation\n"
                 "expect_close(softmax_rows(np.zeros((1, 2))), [[0.5, 0.5]], 'softmax_rows of a zero row')\n"
                 "### BEGIN HIDDEN TESTS\n"
                 "x = np.random.default_rng(7).normal(size=(4, 6))\n"
                 "with no_delegation('softmax_rows', torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax):\n"
                 "    got = softmax_rows(x)\n"
                 "expect_close(got, torch.softmax(torch.tensor(x), dim=1).numpy(), 'softmax_rows(x)', rtol=1e-9)\n"
                 "### END HIDDEN TESTS")


def contract_notebook() -> nbformat.NotebookNode:
    return nbs.normalise(nbs.new_notebook([
        nbs.markdown("# Contract", locked=True),
        nbs.answer("ring", RING),
        nbs.tests("ring_tests", RING_TESTS, 2, ["TH-09"]),
        nbs.tests("ring_validation", RING_VALIDATION, 1, ["TH-09"]),
        nbs.tests("ring_range", RING_RANGE, 1, ["TH-09"]),
        nbs.answer("softmax", SOFTMAX),
        nbs.tests("softmax_tests", SOFTMAX_TESTS, 2, ["TSX-09"]),
    ]))


WRONG_RING = "\ndef ring_time(n, nbytes, alpha, bandwidth):\n    return (n - 1) * alpha + nbytes / bandwidth\n"

# student -> (code put before the ring answer, code after it, code after the softmax answer,
#             expected (ring points, softmax points, ring validation points), flagged test cells)
CLASS = {
    "good": ("", "", "", (2, 2, 1), set()),
    "wrong": ("", WRONG_RING, "", (0, 2, 0), set()),
    # a correct answer that warns on stderr (numpy overflow in a cast, a RuntimeWarning)
    "warns": ("", "\nimport warnings\n_rt = ring_time\ndef ring_time(*a):\n"
              "    warnings.warn('harmless', RuntimeWarning)\n    np.float32(1e300)\n    return _rt(*a)\n"
              "import numpy as np\nimport sys\nprint('note', file=sys.stderr)\n",
              "\n_sm = softmax_rows\ndef softmax_rows(x):\n    import sys\n    print('a warning', file=sys.stderr)\n"
              "    return _sm(x)\n", (2, 2, 1), set()),
    # class 1: a number displayed into the test cell before it raises (nbgrader's partial credit)
    "displayhook": ("import sys", WRONG_RING.replace("    return", "    sys.displayhook(2.0)\n    return"), "", (0, 2, 0), set()),
    # class 1: an input transformer that empties every later test cell
    "empties": ("get_ipython().input_transformers_cleanup.append(\n"
                "    lambda lines: [] if any('expect_' in l for l in lines) else lines)", WRONG_RING, "", (0, 0, 0),
                {"ring_tests", "ring_validation", "ring_range", "softmax_tests"}),
    # class 2: the check replaced through an indirection, publishing a record that says "passed"
    "forger": ("import sys, solutions_lib.grading\n"
               "from IPython.display import publish_display_data as _pub\n"
               "def _fake(got, expected, what, **kw):\n"
               "    _pub({'application/vnd.tas.check+json': {'kind': 'close', 'what': what, 'got': 0.0, 'expected': 0.0,\n"
               "          'shape': [], 'expected_shape': [], 'rtol': 1.0, 'atol': 1.0}})\n"
               "vars(sys.modules['solutions_lib.grading'])['expect_close'] = _fake", WRONG_RING, "", (0, 0, 0),
               {"ring_tests", "softmax_tests"}),
    # class 2: an answer object that looks for the expected value in the check's frames
    "frame_reader": ("", "\nimport sys\nclass _Peek:\n    def __float__(self):\n"
                         "        f = sys._getframe(1)\n        while f is not None:\n"
                         "            if 'expected' in f.f_locals: return float(f.f_locals['expected'])\n"
                         "            f = f.f_back\n        return 0.0\n"
                         "def ring_time(*a):\n    return _Peek()\n", "", (0, 2, 0), set()),
    # the answer calls the reference it should compute (withheld at grading time)
    "calls_reference": ("", "\nimport solutions_lib.comms as _c\ndef ring_time(*a):\n    return _c.ring_allreduce_time(*a)\n",
                        "", (0, 2, 0), set()),
    # class 2: the build-it answer delegated to torch from a thread started before the check
    "thread_delegation": ("", "", "\nimport threading, queue, torch\n_q, _r = queue.Queue(), queue.Queue()\n"
                          "def _worker():\n    while True:\n        _r.put(torch.softmax(torch.tensor(_q.get()), dim=1).numpy())\n"
                          "threading.Thread(target=_worker, daemon=True).start()\n"
                          "def softmax_rows(x):\n    _q.put(np.asarray(x, dtype=float))\n    return _r.get()\n", (2, 0, 1), set()),
    # the answer calls the course's copy of it (solutions_lib.upstream, there for later parts)
    "calls_upstream": ("", "\nfrom solutions_lib import upstream as _u\ndef ring_time(*a):\n    return _u.ring_allreduce_time(*a)\n",
                       "", (0, 2, 0), set()),
    # class 1: no formula at all, only `raise ValueError` (would pass every expect_raises)
    "always_raises": ("", "\ndef ring_time(*a):\n    raise ValueError('not done: no formula yet')\n", "", (0, 2, 0), set()),
    # class 2: a range predicate replaced by one that publishes the real value with bounds that suit it
    "between_forger": ("import sys, solutions_lib.grading\n"
                       "from IPython.display import publish_display_data as _pub\n"
                       "def _fake(got, lo, hi, what, **kw):\n"
                       "    _pub({'application/vnd.tas.check+json': {'kind': 'between', 'what': what, 'got': float(got),\n"
                       "          'shape': [], 'lo': 0.0, 'hi': 10.0}})\n"
                       "vars(sys.modules['solutions_lib.grading'])['expect_between'] = _fake",
                       "\ndef ring_time(*a):\n    return 5.0\n", "", (0, 2, 0), {"ring_range"}),
}


# ring_range: 1 unless the answer is not a number in [1, 2] ms (the wrong formula gives 1.03 ms)
RANGE_POINTS = {"empties": 0, "frame_reader": 0, "calls_reference": 0, "always_raises": 0, "between_forger": 0}


def _submission(before: str, after_ring: str, after_softmax: str) -> nbformat.NotebookNode:
    nb = contract_notebook()
    for cell in nb.cells:
        gid = nbs.nbgrader_md(cell).get("grade_id")
        if gid == "ring":
            cell.source = before + "\n" + nbs.strip_solution_markers(cell.source) + after_ring
        elif gid == "softmax":
            cell.source = nbs.strip_solution_markers(cell.source) + after_softmax
    return nb


def _course(tmp_path: Path) -> Path:
    root = tmp_path / "course"
    src = root / "source" / A
    src.mkdir(parents=True)
    nbs.write(contract_notebook(), src / "contract.ipynb")
    (root / "nbgrader_config.py").write_text(
        "import sys, os\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from solutions_lib.course.config import apply_course_config\n"
        "c = get_config()\n"
        "apply_course_config(c, root=os.path.dirname(os.path.abspath(__file__)), cell_timeout=30)\n")
    return root


# Grader-side (the default), the test cells never reach the kernel: the attacks on them change
# nothing, so these students score what their answers deserve and nothing is flagged.
GRADER_SIDE = {"empties": ((0, 2, 0), set(), 1), "forger": ((0, 2, 0), set(), 1),
               "between_forger": ((0, 2, 0), set(), 0)}


@pytest.mark.nbgrader
@pytest.mark.parametrize("sandbox,side", [
    pytest.param("on", "on", marks=pytest.mark.skipif(not _ok, reason=_why or "sandbox unavailable")),
    pytest.param("on", "off", marks=pytest.mark.skipif(not _ok, reason=_why or "sandbox unavailable")),
    ("off", "on")])
def test_contract_class_scores_what_it_deserves(tmp_path, monkeypatch, sandbox, side):
    """The same scores with the sandbox on (the view bound over the package) and off (the view
    first on the kernel's PYTHONPATH): the verdicts do not depend on the machine. With
    TAS_GRADER_SIDE=off every test cell runs in the kernel (what *beside* cells get): the
    attacks on the test cells lose them and are flagged."""
    root = _course(tmp_path)
    monkeypatch.setenv("TAS_SANDBOX", sandbox)
    monkeypatch.setenv("TAS_GRADER_SIDE", side)
    monkeypatch.setenv("TAS_COURSE_ROOT", str(root))
    monkeypatch.setenv("TAS_TRUSTED_CACHE", str(tmp_path / "trusted"))
    course = Course(root)
    course.generate(A)
    for student, (before, after_ring, after_softmax, _, _) in CLASS.items():
        course.submit(student, A, {"contract.ipynb": _submission(before, after_ring, after_softmax)})
    proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", A, "--force"],
                          cwd=root, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    for student, (_, _, _, (ring, softmax, valid), flagged) in CLASS.items():
        in_range = RANGE_POINTS.get(student, 1)
        if side == "on" and student in GRADER_SIDE:
            (ring, softmax, valid), flagged, in_range = GRADER_SIDE[student]
        res = read_results(root, A, student)
        got = {c.grade_id: c.points for nb in res.notebooks for c in nb.cells}
        assert got.get("ring_range") == in_range, (student, got)
        assert (got.get("ring_tests"), got.get("softmax_tests"), got.get("ring_validation")) == (ring, softmax, valid), \
            (student, got, res)
        graded = nbformat.read(root / "autograded" / student / A / "contract.ipynb", as_version=4)
        marked = {nbs.nbgrader_md(c)["grade_id"] for c in graded.cells if c.metadata.get(METADATA_KEY)}
        assert marked == flagged, (student, marked)
        for cell in graded.cells:
            for o in cell.get("outputs", []):
                assert RECORD_MIME not in o.get("data", {}), student   # records consumed by the grader
                if nbs.nbgrader_md(cell).get("grade"):
                    assert o.get("output_type") != "execute_result" and o.get("name") != "stderr", student
        # every lost point says why
        for nb in res.notebooks:
            for c in nb.cells:
                if c.points == 0:
                    assert c.messages and all(len(m) > 20 for m in c.messages), (student, c)
    msgs = {c.grade_id: c.messages for nb in read_results(root, A, "calls_reference").notebooks for c in nb.cells}
    assert "withheld" in " ".join(msgs["ring_tests"]), msgs
    msgs = {c.grade_id: c.messages for nb in read_results(root, A, "thread_delegation").notebooks for c in nb.cells}
    assert "background thread" in " ".join(msgs["softmax_tests"]), msgs
    msgs = {c.grade_id: c.messages for nb in read_results(root, A, "wrong").notebooks for c in nb.cells}
    assert "expected" in " ".join(msgs["ring_tests"]) and "got" in " ".join(msgs["ring_tests"]), msgs
    msgs = {c.grade_id: c.messages for nb in read_results(root, A, "calls_upstream").notebooks for c in nb.cells}
    assert "solutions_lib.upstream.ring_allreduce_time" in " ".join(msgs["ring_tests"]), msgs
    msgs = {c.grade_id: c.messages for nb in read_results(root, A, "always_raises").notebooks for c in nb.cells}
    assert "this input is valid" in " ".join(msgs["ring_validation"]), msgs


# ---------------------------------------------------------------- the rule, unit by unit


def _rec(**r):
    return nbformat.v4.new_output("display_data", data={RECORD_MIME: r})


def _test_cell(outputs):
    cell = nbformat.v4.new_code_cell("expect_close(f(1), ref.f(1), 'f(1)')")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 1}
    cell.outputs = list(outputs)
    return cell


TRUSTED = {"records": [{"kind": "close", "what": "f(1)", "got": [2.0], "expected": [2.0], "expected_shape": [],
                        "shape": [], "rtol": 1e-9, "atol": 0.0, "unit": "", "hint": "double it"},
                       {"kind": "raises", "what": "f(-1)"}]}


def test_a_cell_passes_only_with_every_trusted_check_verified():
    ok = [_rec(kind="close", what="f(1)", got=2.0, shape=[], withheld=True), _rec(kind="raises", what="f(-1)")]
    assert decide(_test_cell(ok), TRUSTED) == (None, False)
    wrong = [_rec(kind="close", what="f(1)", got=3.0, shape=[], withheld=True), _rec(kind="raises", what="f(-1)")]
    problem, tampering = decide(_test_cell(wrong), TRUSTED)
    assert "expected 2, got 3" in problem and "double it" in problem and not tampering
    # one valid record does not stand for the whole cell
    problem, tampering = decide(_test_cell(ok[:1]), TRUSTED)
    assert "did not run" in problem and tampering
    # a record whose kernel-side expected value was forged: the grader's expected value decides
    forged = [_rec(kind="close", what="f(1)", got=3.0, expected=3.0, shape=[], expected_shape=[]), ok[1]]
    problem, tampering = decide(_test_cell(forged), TRUSTED)
    assert problem and tampering
    # extra records (a student's own checks) are ignored; order matters
    assert decide(_test_cell([_rec(kind="true", what="mine"), *ok]), TRUSTED) == (None, False)
    assert match(list(reversed([dict(o["data"][RECORD_MIME]) for o in ok])), TRUSTED["records"])[1] is not None


def test_output_kinds_neither_award_nor_cost_points():
    from nbgrader.utils import determine_grade

    cell = _test_cell([nbformat.v4.new_output("execute_result", data={"text/plain": "1.0"}, execution_count=1),
                       nbformat.v4.new_output("stream", name="stderr", text="RuntimeWarning: overflow\n"),
                       _rec(kind="raises", what="x")])
    normalise_outputs(cell)
    assert [o["output_type"] for o in cell.outputs] == ["display_data", "stream"]
    assert cell.outputs[1]["name"] == "stdout"
    assert determine_grade(cell) == (1.0, 1.0)


def test_verify_equal_and_claims():
    t = {"kind": "equal", "what": "n", "expected": [2, 3], "hint": ""}
    assert verify({"kind": "equal", "what": "n", "got": [2, 3], "withheld": True}, t) == (None, False)
    assert verify({"kind": "equal", "what": "n", "got": [2, 4], "withheld": True}, t)[0]
    assert verify({"kind": "equal", "what": "n", "got": True, "withheld": True},
                  {"kind": "equal", "what": "n", "expected": 1})[0]   # True is not 1
    assert verify({"kind": "own_work", "what": "x"}, {"kind": "own_work", "what": "x"}) == (None, False)


def test_verify_between_uses_the_trusted_bounds():
    """expect_between is a predicate the grader evaluates itself (rule 4): the trusted run's
    bounds decide, a value outside them fails even when the kernel's record says it passed."""
    t = {"kind": "between", "what": "ratio", "lo": 4.0, "hi": None, "unit": "", "hint": "", "measured": False}
    assert verify({"kind": "between", "what": "ratio", "got": 6.0, "shape": [], "lo": 4.0, "hi": None}, t) == (None, False)
    # the kernel's record forged its own bound (lo = 0): the trusted bound decides, and it is flagged
    problem, tampering = verify({"kind": "between", "what": "ratio", "got": 2.0, "shape": [], "lo": 0.0, "hi": None}, t)
    assert "at least 4" in problem and tampering
    # withheld bounds in the kernel: decided here, an ordinary failure
    problem, tampering = verify({"kind": "between", "what": "ratio", "got": [1.0, 9.0], "shape": [2], "withheld": True}, t)
    assert "1 of 2 entries" in problem and not tampering
    assert "non-finite" in verify({"kind": "between", "what": "ratio", "got": float("nan"), "shape": [], "withheld": True}, t)[0]
    # measured bounds (from this kernel's own measurement) come from the kernel
    tm = dict(t, measured=True)
    assert verify({"kind": "between", "what": "ratio", "got": 2.0, "shape": [], "lo": 1.0, "hi": 3.0}, tm) == (None, False)
    assert verify({"kind": "between", "what": "ratio", "got": 2.0, "shape": [], "withheld": True}, tm)[1]


def test_expect_between_and_accepts_in_the_kernel():
    from solutions_lib.grading import GradingError, expect_accepts, expect_between

    expect_between([0.5, 1.0], 0, 1, "p")
    expect_between(7.0, 4, None, "ratio")
    with pytest.raises(GradingError, match="between 0 and 1"):
        expect_between([0.5, 1.5], 0, 1, "p")
    with pytest.raises(GradingError, match="non-finite"):
        expect_between(float("inf"), None, None, "x")
    expect_accepts(lambda: 3.0, "valid input")
    with pytest.raises(GradingError, match="this input is valid, but your code raised ValueError"):
        expect_accepts(lambda: (_ for _ in ()).throw(ValueError("nope")), "valid input")
