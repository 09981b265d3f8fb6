"""Fairness harness (issue 15): points a correct submission must never lose.

Two sweeps over the course's own solutions, graded with stock nbgrader in a temporary course
exactly as a class would be (sandbox, trusted run, withheld references):

- **warnings**: every top-level function of every answer cell of the solved notebooks first
  emits harmless warnings (a `RuntimeWarning`, numpy's overflow in a float32 cast, a
  `UserWarning` as torch gives for deprecations): the submission must score what the plain
  solved one scores, cell by cell. Warnings go to stderr, which stock nbgrader scores as a
  failed test cell; the course's grader does not (integrity.normalise_outputs).
- **cascades**: for each answer cell in turn, only that answer is replaced by its blank stub
  (`raise NotImplementedError()`): points may be lost only in the test cells that test that
  answer (the test cells between it and the next answer cell). Any other lost point is a
  cascade, printed with the answer that caused it.

`python -m solutions_lib bench fairness [--assignments A,B] [--sweep warnings|cascades|both]`
runs the full sweeps (the cascade sweep grades one submission per answer cell: long);
`tests/test_fairness.py` runs the warnings sweep on a sample in CI.
"""
from __future__ import annotations

import ast
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import notebooks as nbs

WARN_LINES = ("import warnings as _tas_w, numpy as _tas_np",
              "_tas_w.warn('a harmless warning', RuntimeWarning)",
              "_tas_w.warn('a harmless deprecation', UserWarning)",
              "_tas_np.float32(1e300)  # RuntimeWarning: overflow encountered in cast")


def add_warnings(source: str) -> str:
    """`source` with WARN_LINES at the start of the body of every top-level function (and of
    every method of a top-level class). Sources that do not parse are returned unchanged."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.split("\n")
    inserts: list[tuple[int, int]] = []       # (0-based line index, indent)

    def visit(fn):
        first = fn.body[0]
        if first.lineno == fn.lineno:          # `def f(): return 1` on one line
            return
        inserts.append((first.lineno - 1, first.col_offset))

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(item)
    for i, indent in sorted(inserts, reverse=True):
        lines[i:i] = [" " * indent + ln for ln in WARN_LINES]
    return "\n".join(lines)


def answer_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and nbs.nbgrader_md(c).get("solution")]


def with_warnings(nb) -> nbformat.NotebookNode:
    out = nbformat.from_dict(json.loads(json.dumps(nb)))
    for cell in answer_cells(out):
        cell.source = add_warnings(cell.source)
    return out


def answer_tests(nb) -> dict[str, list[str]]:
    """answer grade_id -> grade_ids of the test cells that follow it, before the next answer
    that comes after a test cell (consecutive answer cells, e.g. a function and its plot, share
    the test cells after them)."""
    out: dict[str, list[str]] = {}
    group: list[str] = []
    seen_test = False
    for c in nb.cells:
        md = nbs.nbgrader_md(c)
        if c.cell_type == "code" and md.get("solution"):
            if seen_test:
                group, seen_test = [], False
            group.append(md.get("grade_id"))
            out[md.get("grade_id")] = []
        elif group and c.cell_type == "code" and md.get("grade") and not md.get("solution"):
            seen_test = True
            for gid in group:
                out[gid].append(md.get("grade_id"))
    return out


@dataclass
class SweepResult:
    assignment: str
    kind: str
    baseline: dict = field(default_factory=dict)         # notebook -> {cell: points}
    problems: list[str] = field(default_factory=list)    # one line per point lost unfairly
    graded: int = 0
    warned_cells: int = 0                                 # test cells that showed the warnings


def _points(course, a: str, student: str) -> dict[str, dict[str, float | None]]:
    res = course.results(a, student)
    return {n.name: {c.grade_id: c.points for c in n.cells if c.kind == "tests"} for n in res.notebooks}


def _course(a: str, root: Path | None, tmp: Path):
    from .grader import Course, make_course
    from .paths import course_root

    course = Course(make_course(tmp / a, [a], Path(root or course_root())))
    course.generate(a)
    names = sorted(p.name for p in (course.root / "source" / a).glob("*.ipynb"))
    return course, names


def sweep(a: str, kind: str = "warnings", root: Path | None = None, out=print,
          notebooks: list[str] | None = None) -> SweepResult:
    """Run one sweep on assignment `a`; returns what was lost unfairly (see the module docstring)."""
    from .grader import solved_version

    r = SweepResult(a, kind)
    with tempfile.TemporaryDirectory(prefix="tas-fairness-") as t:
        course, names = _course(a, root, Path(t))
        names = [n for n in names if notebooks is None or n in notebooks]
        solved = {n: solved_version(course.release_notebook(a, n), nbs.read(course.root / "source" / a / n)) for n in names}
        course.submit("solved", a, solved)
        course.autograde(a, "solved")
        r.baseline = _points(course, a, "solved")
        r.graded += 1
        if kind == "warnings":
            course.submit("warned", a, {n: with_warnings(nb) for n, nb in solved.items()})
            course.autograde(a, "warned")
            r.graded += 1
            got = _points(course, a, "warned")
            for n in names:
                graded_nb = course.root / "autograded" / "warned" / a / n
                if graded_nb.is_file():
                    r.warned_cells += sum(
                        1 for c in nbformat.read(graded_nb, as_version=4).cells
                        if nbs.nbgrader_md(c).get("grade") and "harmless" in json.dumps(c.get("outputs", [])))
            for n, cells in r.baseline.items():
                for gid, pts in cells.items():
                    if (got.get(n, {}).get(gid) or 0) < (pts or 0):
                        r.problems.append(f"{a}/{n} {gid}: {pts:g} -> {got.get(n, {}).get(gid)} with harmless warnings")
        else:
            release = {n: course.release_notebook(a, n) for n in names}
            for n in names:
                own = answer_tests(solved[n])
                for k, cell in enumerate(answer_cells(solved[n])):
                    gid = nbs.nbgrader_md(cell)["grade_id"]
                    # Each notebook runs in its own kernel, so a blank answer can only cost points
                    # in its own notebook: the submission holds that notebook alone.
                    sub = nbformat.from_dict(json.loads(json.dumps(solved[n])))
                    blank = next(c for c in release[n].cells if nbs.nbgrader_md(c).get("grade_id") == gid)
                    answer_cells(sub)[k].source = blank.source
                    student = f"blank-{n.removesuffix('.ipynb')}-{k}"
                    course.submit(student, a, {n: sub})
                    course.autograde(a, student)
                    r.graded += 1
                    got = _points(course, a, student).get(n, {})
                    for tid, pts in r.baseline.get(n, {}).items():
                        if tid not in own.get(gid, []) and (got.get(tid) or 0) < (pts or 0):
                            r.problems.append(f"{a}: blanking {n}:{gid} costs {n}:{tid} "
                                              f"({pts:g} -> {got.get(tid)})")
                    out(f"  {a} {n} {gid}: {sum(1 for p in r.problems if f'{n}:{gid} ' in p)} cascaded cell(s)")
    return r


def main(assignments: list[str] | None = None, kinds: tuple[str, ...] = ("warnings", "cascades"), out=print) -> bool:
    import warnings

    from .paths import assignments as all_assignments, course_root

    warnings.filterwarnings("ignore", message=".*not in session.*")   # nbgrader's SQLAlchemy noise
    names = list(assignments or all_assignments(course_root()))
    problems = []
    for kind in kinds:
        for a in names:
            r = sweep(a, kind, out=out)
            out(f"{kind:<9} {a:<24} {r.graded:>3} submissions graded, {len(r.problems)} unfair loss(es)")
            for p in r.problems:
                out(f"    {p}")
            problems += r.problems
    out(f"fairness: {len(problems)} point loss(es) an honest student did not deserve "
        f"({'goal met' if not problems else 'goal NOT met'})")
    return not problems
