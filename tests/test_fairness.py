"""Fairness (issue 15): harmless warnings in every answer function cost nothing, and blanking one
answer costs only the test cells of that answer (no cascade), proven through stock nbgrader on
the fixture course and on one real assignment. The full sweeps over the whole course:
`python -m solutions_lib bench fairness`."""
from __future__ import annotations

import warnings

import pytest

from solutions_lib.course.fairness import WARN_LINES, add_warnings, sweep, answer_tests
from solutions_lib.course import notebooks as nbs

from conftest import FIXTURE, ROOT

pytestmark = pytest.mark.nbgrader


def test_add_warnings_puts_them_in_every_function_and_method():
    src = "import math\n\ndef f(x):\n    \"\"\"doc\"\"\"\n    return x\n\nclass C:\n    def m(self):\n        return 1\n\ndef g(): return 2\n"
    out = add_warnings(src)
    ns = {}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        exec(compile(out, "<answer>", "exec"), ns)
        assert ns["f"](3) == 3 and ns["C"]().m() == 1 and ns["g"]() == 2
    kinds = {type(x.message).__name__ for x in w}
    assert {"RuntimeWarning", "UserWarning"} <= kinds
    assert out.count(WARN_LINES[1]) == 2           # f and m; the one-line g is left alone
    assert add_warnings("def broken(:\n") == "def broken(:\n"


def test_tests_of_maps_answers_to_their_test_cells():
    nb = nbs.read(ROOT / "source" / "02_lr_schedules" / "exercises.ipynb")
    m = answer_tests(nb)
    assert m["step_decay_answer"][0] == "step_decay_tests"   # then its validation cell
    assert all(m.values())


def test_warnings_cost_nothing_fixture(fixture_course):
    r = sweep(FIXTURE, "warnings", root=fixture_course)
    assert sum(v for cells in r.baseline.values() for v in cells.values() if v) == 6
    assert r.warned_cells >= 2          # the warnings did reach the test cells (on stderr)
    assert not r.problems, r.problems


def test_no_cascade_fixture(fixture_course):
    r = sweep(FIXTURE, "cascades", root=fixture_course)
    assert not r.problems, r.problems
    assert r.graded == 1 + 3


@pytest.mark.xdist_group("01_optimizers")
def test_warnings_cost_nothing_01_optimizers():
    r = sweep("01_optimizers", "warnings", root=ROOT)
    assert r.warned_cells >= 3
    assert not r.problems, r.problems
