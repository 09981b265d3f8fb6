"""Every assignment through nbgrader on a temporary copy of the course: the solved source
scores full auto-graded marks, the blank release scores zero, release/ has no drift and no
leaks, and the self-check agrees with `nbgrader autograde` on the same submission."""
from __future__ import annotations

import json

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, make_course, solved_version
from solutions_lib.course.paths import assignments
from solutions_lib.course.selfcheck import check

from conftest import ROOT

pytestmark = pytest.mark.nbgrader
ASSIGNMENTS = assignments(ROOT)
PARAMS = [pytest.param(a, marks=pytest.mark.xdist_group(a)) for a in ASSIGNMENTS]


@pytest.fixture(scope="module", params=PARAMS)
def graded(request, tmp_path_factory):
    """One temporary course per assignment with a solved, a blank and a half-solved student."""
    a = request.param
    course = Course(make_course(tmp_path_factory.mktemp(a), [a], ROOT))
    course.generate(a)
    names = sorted(p.name for p in (ROOT / "source" / a).glob("*.ipynb"))
    rel = {n: course.release_notebook(a, n) for n in names}
    src = {n: nbs.read(ROOT / "source" / a / n) for n in names}
    course.submit("solved", a, {n: solved_version(rel[n], src[n]) for n in names})
    course.submit("blank", a, rel)
    course.submit("half", a, {n: solved_version(rel[n], src[n], 0.5) for n in names})
    for student in ("solved", "blank", "half"):
        course.autograde(a, student)
    return a, course


def test_solved_scores_full_marks(graded):
    a, course = graded
    res = course.results(a, "solved")
    for nb in res.notebooks:
        assert nb.status == "graded", f"{a}/{nb.name}: {nb.detail}"
        lost = [(c.grade_id, c.points, c.max_points, c.messages) for c in nb.cells
                if c.kind == "tests" and c.points < c.max_points]
        assert not lost, f"{a}/{nb.name}: the solved notebook loses points: {lost}"
        assert nb.max_score("tests") > 0


def test_blank_scores_zero(graded):
    a, course = graded
    res = course.results(a, "blank")
    for nb in res.notebooks:
        assert nb.status == "graded", f"{a}/{nb.name}: {nb.detail}"
        earned = [(c.grade_id, c.points) for c in nb.cells if c.points]
        assert not earned, f"{a}/{nb.name}: the blank notebook earns points: {earned}"


def test_half_solved_scores_in_between(graded):
    a, course = graded
    half = course.results(a, "half").score("tests")
    full = course.results(a, "solved").score("tests")
    assert 0 < half < full, f"{a}: half-solved scored {half} of {full}"


@pytest.mark.parametrize("student", ["blank", "half"])
def test_every_lost_point_says_why(graded, student):
    """Issue 15: every test cell that scores less than full carries a message a student can act
    on (what was checked, or which answer is missing), never a bare zero."""
    a, course = graded
    for nb in course.results(a, student).notebooks:
        for c in nb.cells:
            if c.kind == "tests" and (c.points or 0) < c.max_points:
                text = " ".join(c.messages)
                assert len(text) >= 15, f"{a}/{nb.name} {c.grade_id}: scores {c.points} with no reason: {c.messages}"


def test_selfcheck_agrees_with_autograde(graded, monkeypatch):
    a, course = graded
    monkeypatch.setenv("TAS_COURSE_ROOT", str(ROOT))
    res = course.results(a, "half")
    nb_res = res.notebooks[0]
    path = course.root / "submitted" / "half" / a / nb_res.name
    report = check(path)
    assert report.status == "graded"
    assert {q["grade_id"]: q["points"] for q in report.questions} == {c.grade_id: c.points for c in nb_res.cells}


def _strip_volatile(nb):
    nb = json.loads(json.dumps(nb))
    for c in nb["cells"]:
        c.pop("id", None)
    return nb


def test_release_equals_fresh_generate(graded):
    a, course = graded
    committed = sorted(p.name for p in (ROOT / "release" / a).glob("*.ipynb"))
    fresh = sorted(p.name for p in (course.root / "release" / a).glob("*.ipynb"))
    assert committed == fresh, f"release/{a} is stale: run `make release`"
    for name in fresh:
        ours = _strip_volatile(nbformat.read(ROOT / "release" / a / name, as_version=4))
        new = _strip_volatile(nbformat.read(course.root / "release" / a / name, as_version=4))
        assert ours == new, f"release/{a}/{name} differs from a fresh generate_assignment: run `make release`"


def test_release_leaks_no_solution_or_hidden_test(graded):
    a, _ = graded
    for path in (ROOT / "release" / a).glob("*.ipynb"):
        text = path.read_text()
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{path} contains {marker}"
        src = nbs.read(ROOT / "source" / a / path.name)
        released = {ln.strip() for c in nbs.read(path).cells for ln in c.source.splitlines()}
        secret, public = set(), set()
        for cell in src.cells:
            blocks = _blocks(cell.source, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS") + \
                _blocks(cell.source, "### BEGIN SOLUTION", "### END SOLUTION")
            secret |= {ln.strip() for b in blocks for ln in b}
            public |= {ln.strip() for ln in _outside_blocks(cell.source)}
        leaks = sorted(ln for ln in (secret - public) & released if len(ln) > 25)
        assert not leaks, f"{path} leaks solution or hidden-test lines: {leaks[:3]}"


def _blocks(source: str, begin: str, end: str) -> list[list[str]]:
    out, cur = [], None
    for line in source.splitlines():
        if line.strip() == begin:
            cur = []
        elif line.strip() == end and cur is not None:
            out.append(cur)
            cur = None
        elif cur is not None:
            cur.append(line)
    return out


def _outside_blocks(source: str) -> list[str]:
    """Lines a student sees: everything outside solution and hidden-test blocks."""
    out, depth = [], 0
    for line in source.splitlines():
        if line.strip() in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"):
            depth += 1
        elif line.strip() in ("### END SOLUTION", "### END HIDDEN TESTS"):
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(line)
    return out
