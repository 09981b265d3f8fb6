"""What a generic cheat cell collects (issue 26): `python -m solutions_lib bench cheat`.

A student who has read all of the course's code can add one cell at the top of a notebook that
replaces the check functions of `solutions_lib.grading` (again before every cell, so every alias
sees them) with versions that publish passing records: every claim (`expect_raises`,
`expect_accepts`, `expect_true`, `expect_own`, `no_delegation`) and, for a value check, the
expected value whenever the kernel holds it (a literal, torch, a kit helper, a `solutions_lib.upstream`
copy). Against a withheld reference it can only report what the answer returned.

The bench submits, for every notebook of an assignment, the *blank* release notebook with
`CHEAT_CELL` first, grades it with stock autograde (sandbox on) and prints the points it got
out of the auto-graded total, with the goal of issue 26: at most 2% of any assignment's
auto-graded points. It measures; it changes no grade.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import nbformat

from . import notebooks as nbs

GOAL = 0.02

CHEAT_CELL = r'''
import contextlib as _cl
import numpy as _np
import solutions_lib.grading as _g
from solutions_lib.withheld import contains_withheld as _cw


def _vals(x):
    a = _np.asarray(_g.plain(x), dtype=_np.float64)
    v, sampled = _g._record_values(a)
    return a, v, sampled


def expect_close(got, expected, what, *, rtol=1e-6, atol=0.0, unit="", hint="", measured=False):
    base = dict(rtol=float(rtol), atol=float(atol), unit=str(unit), hint=str(hint), measured=bool(measured))
    if _cw(expected):
        try:
            a, v, s = _vals(got)
        except Exception:
            a, v, s = _np.zeros(1), [0.0], False
        _g._publish_record("close", what, got=v, sampled=s, withheld=True, calls=None, shape=list(a.shape), **base)
        return
    a, v, s = _vals(expected)
    _g._publish_record("close", what, got=v, expected=v, expected_shape=list(a.shape), sampled=s,
                       shape=list(a.shape), **base)


def expect_equal(got, expected, what, hint=""):
    if _cw(expected):
        g = _g._jsonable(_g.plain(got)) if not _cw(got) else None
        _g._publish_record("equal", what, got=g, got_repr="", withheld=True, hint=str(hint))
        return
    e = _g._jsonable(_g.plain(expected))
    _g._publish_record("equal", what, got=e, expected=e, hint=str(hint))


def expect_between(got, lo, hi, what, *, unit="", hint="", measured=False):
    base = dict(unit=str(unit), hint=str(hint), measured=bool(measured), shape=[1])
    if _cw(lo) or _cw(hi):
        _g._publish_record("between", what, got=[0.0], sampled=False, withheld=True, **base)
        return
    lo_ = None if lo is None else float(_np.asarray(_g.plain(lo)))
    hi_ = None if hi is None else float(_np.asarray(_g.plain(hi)))
    v = lo_ if lo_ is not None else (hi_ if hi_ is not None else 0.0)
    _g._publish_record("between", what, got=[v], sampled=False, lo=lo_, hi=hi_, **base)


def expect_true(condition, message):
    _g._publish_record("true", message)


def expect_raises(fn, exc_type, what, hint=""):
    _g._publish_record("raises", what)


def expect_accepts(fn, what, hint=""):
    _g._publish_record("accepts", what)


def expect_own(obj, task, *forbidden):
    _g._publish_record("own_work", task)


@_cl.contextmanager
def no_delegation(task, *forbidden):
    yield
    _g._publish_record("own_work", task)


_FAKES = dict(expect_close=expect_close, expect_equal=expect_equal, expect_between=expect_between,
              expect_true=expect_true, expect_raises=expect_raises, expect_accepts=expect_accepts,
              expect_own=expect_own, no_delegation=no_delegation)


def _apply(*_):
    for k, v in _FAKES.items():
        setattr(_g, k, v)


_apply()
get_ipython().events.register("pre_run_cell", _apply)
'''


def with_cheat(nb) -> nbformat.NotebookNode:
    """`nb` with CHEAT_CELL as its first cell (an unlocked code cell a student may add)."""
    out = nbformat.from_dict(nbformat.reads(nbformat.writes(nb), as_version=4))
    out.cells.insert(0, nbformat.v4.new_code_cell(CHEAT_CELL.strip()))
    return out


def measure(assignment: str, root: Path | None = None, out=print) -> tuple[float, float, int]:
    """(points the cheat got, auto-graded maximum, flagged cells) for `assignment`."""
    from .grader import Course, make_course
    from .paths import course_root

    root = Path(root or course_root())
    with tempfile.TemporaryDirectory(prefix="tas-cheat-") as t:
        course = Course(make_course(Path(t) / assignment, [assignment], root))
        course.generate(assignment)
        names = sorted(p.name for p in (course.root / "source" / assignment).glob("*.ipynb"))
        course.submit("cheat", assignment, {n: with_cheat(course.release_notebook(assignment, n)) for n in names})
        course.autograde(assignment, "cheat")
        res = course.results(assignment, "cheat")
        got = res.score("tests")
        total = res.max_score("tests")
        flagged = 0
        for n in names:
            graded = course.root / "autograded" / "cheat" / assignment / n
            if graded.is_file():
                flagged += sum(1 for c in nbformat.read(graded, as_version=4).cells
                               if "flagged for your instructor" in json.dumps(c.get("outputs", [])))
        for nb in res.notebooks:
            won = [c.grade_id for c in nb.cells if c.kind == "tests" and (c.points or 0) > 0]
            out(f"  {assignment}/{nb.name}: {nb.score('tests'):g} / {nb.max_score('tests'):g}"
                + (f" ({', '.join(won[:8])}{' ...' if len(won) > 8 else ''})" if won else "")
                + f"; {where_graded(course.root / 'source' / assignment / nb.name)}")
    return got, total, flagged


def where_graded(source_nb: Path) -> str:
    """'grader-side: P of Q points (n of m test cells)' for a source notebook, from its trusted run."""
    from .grader_side import _grade_id
    from .trusted import trusted_records

    entry = trusted_records(source_nb)
    side = set(entry.get("grader_side", []))
    nb = nbformat.read(source_nb, as_version=4)
    pts = {_grade_id(c): float((c.metadata.get("nbgrader", {}) or {}).get("points", 0) or 0)
           for c in nb.cells if _grade_id(c)}
    on = sum(p for g, p in pts.items() if g in side)
    return (f"grader-side {on:g} of {sum(pts.values()):g} points ({len(side & set(pts))} of {len(pts)} test cells; "
            f"the rest run in the kernel)")


def main(assignments: list[str] | None = None, out=print) -> bool:
    from .paths import assignments as all_assignments, course_root

    import warnings
    warnings.filterwarnings("ignore", message=".*not in session.*")
    root = course_root()
    t0 = time.perf_counter()
    worst, total_got, total_max = 0.0, 0.0, 0.0
    for a in assignments or all_assignments(root):
        got, mx, flagged = measure(a, root, out)
        share = got / mx if mx else 0.0
        worst = max(worst, share)
        total_got += got
        total_max += mx
        out(f"{a:<24} the cheat cell with no answers: {got:g} / {mx:g} auto-graded points ({share:.1%}), "
            f"{flagged} cell(s) flagged")
    ok = worst <= GOAL
    out(f"cheat: {total_got:g} / {total_max:g} points course-wide; worst assignment {worst:.1%} "
        f"(goal <= {GOAL:.0%}: {'met' if ok else 'NOT met'}; {time.perf_counter() - t0:.0f} s)")
    return ok
