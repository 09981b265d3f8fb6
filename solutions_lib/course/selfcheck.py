"""Self-check for self-study learners: grade your own notebook with the hidden tests.

`python -m solutions_lib check PATH.ipynb` finds which course notebook PATH is (by its
cells' grade ids, so a renamed file is still recognised), copies that assignment's source
into a temporary course, and runs stock `nbgrader autograde` on PATH there. The
instructor's gradebook is never opened. Deleted or edited test cells are put back from the
source before grading, exactly as the instructor's autograde would, and reported.

Exit status: 0 at full marks on every auto-graded question with no problem to fix,
1 when points are missing or the notebook needs a fix before hand-in, 2 when the file
cannot be checked at all (not a notebook, not one of the course's).
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import notebooks as nbs
from .grader import Course, make_course
from .paths import assignments, course_root

STUDENT = "self-check"


class CheckError(Exception):
    """The notebook cannot be checked; the message says why and what to do."""


@dataclass
class Match:
    assignment: str
    name: str
    source: object  # NotebookNode


@dataclass
class Report:
    path: str
    assignment: str
    notebook: str
    status: str
    score: float
    max_score: float
    auto_score: float
    auto_max: float
    manual_max: float
    questions: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    @property
    def full_marks(self) -> bool:
        return self.status == "graded" and self.auto_score >= self.auto_max and not self.warnings


def _grade_ids(nb) -> set[str]:
    return {nbs.nbgrader_md(c).get("grade_id") for c in nb.cells if nbs.nbgrader_md(c).get("grade_id")}


def identify(nb, filename: str, root: Path) -> Match:
    """The course notebook `nb` comes from, by the overlap of its grade ids."""
    ids = _grade_ids(nb)
    best, best_overlap = None, 0.0
    for a in assignments(root):
        for path in sorted((root / "source" / a).glob("*.ipynb")):
            src = nbs.read(path)
            src_ids = _grade_ids(src)
            if not src_ids:
                continue
            overlap = len(ids & src_ids) / len(src_ids)
            if overlap > best_overlap or (overlap == best_overlap and overlap > 0 and path.name == filename):
                best, best_overlap = Match(a, path.name, src), overlap
    if best is None:
        raise CheckError(
            f"{filename} is not one of this course's notebooks: none of its cells carries the "
            "nbgrader ids of a course notebook. Check the notebook you downloaded from release/.")
    return best


def structural_warnings(nb, match: Match, filename: str, release_nb) -> list[str]:
    """Problems the instructor's grader would silently fix or punish; reported to the learner."""
    out = []
    if filename != match.name:
        out.append(f"the file is named {filename!r} but nbgrader grades it only as {match.name!r} "
                   f"in {match.assignment}/: rename it before you hand it in.")
    by_id = {nbs.nbgrader_md(c).get("grade_id"): c for c in nb.cells}
    for cell in release_nb.cells:
        md = nbs.nbgrader_md(cell)
        if not (md.get("grade") and not md.get("solution")):
            continue  # only autograder test cells are restored by the grader
        gid = md["grade_id"]
        mine = by_id.get(gid)
        if mine is None:
            out.append(f"test cell {gid!r} was deleted; the grader puts the original back (as here).")
        elif mine.source.strip() != cell.source.strip():
            out.append(f"test cell {gid!r} was edited; the grader runs the original instead (as here).")
    return out


def check(path: str | Path, root: Path | None = None, cell_timeout: int | None = None) -> Report:
    """Grade the notebook at `path` with the hidden tests in a throw-away course."""
    root = Path(root or course_root())
    path = Path(path)
    if not path.is_file():
        raise CheckError(f"{path}: no such file")
    if path.suffix != ".ipynb":
        raise CheckError(f"{path}: not a notebook (expected a .ipynb file)")
    try:
        nb = nbs.read(path)
    except ValueError as e:
        raise CheckError(f"{e}. Open it in JupyterLab to repair it, or start again from the "
                         "released notebook and copy your answers over.") from None
    match = identify(nb, path.name, root)
    from .sandbox import sandbox_available
    if os.environ.get("TAS_SANDBOX", "on") != "off" and not sandbox_available()[0]:
        # the learner's own code on the learner's own machine: nothing to protect (issue 26)
        os.environ["TAS_SANDBOX"] = "off"
    with tempfile.TemporaryDirectory(prefix="tas-selfcheck-") as tmp:
        course = Course(make_course(Path(tmp), [match.assignment], root), cell_timeout=cell_timeout)
        course.generate(match.assignment)
        release_nb = course.release_notebook(match.assignment, match.name)
        warnings = structural_warnings(nb, match, path.name, release_nb)
        course.submit(STUDENT, match.assignment, {match.name: path.read_bytes()})
        course.autograde(match.assignment, STUDENT)
        result = course.results(match.assignment, STUDENT)
    nbres = next(n for n in result.notebooks if n.name == match.name)
    report = Report(
        path=str(path), assignment=match.assignment, notebook=match.name, status=nbres.status,
        score=nbres.score(), max_score=nbres.max_score(),
        auto_score=nbres.score("tests"), auto_max=nbres.max_score("tests"),
        manual_max=nbres.max_score("written"), warnings=warnings,
        questions=[dict(asdict(c), status=c.status) for c in nbres.cells],
    )
    if nbres.status != "graded":
        report.warnings.append(f"the notebook {nbres.detail}: the grader gives it no score. "
                               "Look for os._exit, sys.exit in a loop, or a cell that uses too much memory.")
    return report


def _hint(message: str) -> str:
    if message.startswith("NotImplementedError"):
        return message + "  (an answer cell above still raises NotImplementedError: fill it in)"
    if message.startswith("NameError"):
        return message + "  (a name the test needs is not defined: run your answer cell, check its spelling)"
    if message.startswith("CellTimeoutError"):
        return message + "  (a cell ran past the time limit: look for an endless loop)"
    return message


def format_report(r: Report) -> str:
    lines = [f"{r.assignment}/{r.notebook}  ({r.path})", ""]
    for q in r.questions:
        if q["status"] == "manual":
            lines.append(f"  {q['grade_id']:<32} -- / {q['max_points']:g}  written answer: graded by a person")
            continue
        if q["kind"] == "written":
            lines.append(f"  {q['grade_id']:<32} {q['points']:g} / {q['max_points']:g}  written answer left blank")
            continue
        mark = "PASS" if q["status"] == "pass" else "FAIL"
        lines.append(f"  {q['grade_id']:<32} {q['points']:g} / {q['max_points']:g}  {mark}")
        for m in q["messages"]:
            lines.append(f"      {_hint(m)}")
    lines.append("")
    if r.status != "graded":
        lines.append("  NOT GRADED: the notebook did not run to the end.")
    lines.append(f"  auto-graded: {r.auto_score:g} / {r.auto_max:g} points"
                 + (f"; written answers worth {r.manual_max:g} more are graded by a person" if r.manual_max else ""))
    for w in r.warnings:
        lines.append(f"  WARNING: {w}")
    lines.append("  full marks on the auto-graded questions." if r.full_marks else "  not yet at full marks.")
    return "\n".join(lines)


def to_json(r: Report) -> str:
    return json.dumps(dict(asdict(r), full_marks=r.full_marks), indent=2)
