"""Grading through nbgrader: temporary courses, submissions, autograde and the results.

Everything here drives stock nbgrader (its Python API, in-process) with the course's own
settings (`solutions_lib.course.config`), so a temporary course grades exactly as the
instructor's course does. Results are read back from the gradebook and from the
autograded notebooks, and a notebook whose kernel died is reported as *failed to run*,
never as a silent zero.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from traitlets.config import Config

from . import notebooks as nbs
from .config import apply_course_config, gradebook_url
from .intake import folder_problem, intake_problem
from .paths import course_root


def ensure_tools_on_path() -> None:
    """nbgrader runs `alembic` (and jupyter_client the kernel) from PATH: put this
    interpreter's bin/ first so the course works without an activated virtual environment."""
    bindir = os.path.dirname(sys.executable)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if parts[:1] != [bindir]:
        os.environ["PATH"] = os.pathsep.join([bindir] + [p for p in parts if p != bindir])


def course_config(course: Path, cell_timeout: int | None = None) -> Config:
    c = Config()
    kwargs = {} if cell_timeout is None else {"cell_timeout": cell_timeout}
    apply_course_config(c, root=str(course), **kwargs)
    c.NbGraderAPI.log_level = "WARN"
    return c


def make_course(dest: Path, assignments: list[str], root: Path | None = None) -> Path:
    """A fresh course at `dest` holding copies of `source/<a>` for each assignment."""
    root = Path(root or course_root())
    dest = Path(dest)
    (dest / "source").mkdir(parents=True, exist_ok=True)
    for a in assignments:
        src = root / "source" / a
        if not src.is_dir():
            raise ValueError(f"no assignment {a!r} under {root / 'source'}")
        shutil.copytree(src, dest / "source" / a, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return dest


class Course:
    """A course folder driven through nbgrader's Python API."""

    def __init__(self, root: Path, cell_timeout: int | None = None):
        from nbgrader.apps import NbGraderAPI
        from nbgrader.coursedir import CourseDirectory

        ensure_tools_on_path()
        self.root = Path(root).resolve()
        self.config = course_config(self.root, cell_timeout)
        self.api = NbGraderAPI(coursedir=CourseDirectory(config=self.config), config=self.config)

    def _check(self, result: dict, what: str) -> dict:
        if not result.get("success"):
            raise RuntimeError(f"nbgrader {what} failed:\n{result.get('log', '')}\n{result.get('error', '')}")
        return result

    def generate(self, assignment: str) -> None:
        """`nbgrader generate_assignment --force`: release/ and the gradebook's copy of the source."""
        self._check(self.api.generate_assignment(assignment, force=True), f"generate_assignment {assignment}")

    def submit(self, student: str, assignment: str, notebooks: dict[str, nbformat.NotebookNode | str | bytes]) -> Path:
        """Place a submission: {notebook file name: notebook, raw text or raw bytes}."""
        folder = self.root / "submitted" / student / assignment
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name, content in notebooks.items():
            path = folder / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            elif isinstance(content, str):
                path.write_text(content, encoding="utf-8")
            else:
                path.write_text(nbformat.writes(content), encoding="utf-8")
        (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
        return folder

    def autograde(self, assignment: str, student: str) -> dict:
        """`nbgrader autograde --force` for one student; returns nbgrader's result dict
        (success False when a kernel died or a notebook could not be read)."""
        return self.api.autograde(assignment, student, force=True, create=True)

    def release_notebook(self, assignment: str, name: str) -> nbformat.NotebookNode:
        return nbformat.read(self.root / "release" / assignment / name, as_version=4)

    def results(self, assignment: str, student: str) -> "AssignmentResult":
        return read_results(self.root, assignment, student)


# ---------------------------------------------------------------- results


@dataclass
class CellResult:
    grade_id: str
    points: float | None          # None: waiting for a human grader
    max_points: float
    kind: str                     # "tests" or "written"
    messages: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.points is None:
            return "manual"
        return "pass" if self.points >= self.max_points else "fail"


@dataclass
class NotebookResult:
    name: str
    status: str                   # "graded", "failed" (did not run to the end), "missing"
    cells: list[CellResult] = field(default_factory=list)
    detail: str = ""
    graded_in: str = ""           # "sandbox" or "plain kernel (TAS_SANDBOX=off)"; "" when not graded

    def score(self, kind: str | None = None) -> float:
        return sum(c.points or 0.0 for c in self.cells if kind in (None, c.kind))

    def max_score(self, kind: str | None = None) -> float:
        return sum(c.max_points for c in self.cells if kind in (None, c.kind))

    @property
    def pending_manual(self) -> float:
        return sum(c.max_points for c in self.cells if c.points is None)


@dataclass
class AssignmentResult:
    assignment: str
    student: str
    notebooks: list[NotebookResult]

    @property
    def failed(self) -> list[NotebookResult]:
        return [n for n in self.notebooks if n.status != "graded"]

    def score(self, kind: str | None = None) -> float:
        return sum(n.score(kind) for n in self.notebooks)

    def max_score(self, kind: str | None = None) -> float:
        return sum(n.max_score(kind) for n in self.notebooks)

    @property
    def pending_manual(self) -> float:
        return sum(n.pending_manual for n in self.notebooks if n.status == "graded")


def error_messages(cell) -> list[str]:
    """'Name: message' for each error a cell's outputs hold (a failing test's message)."""
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            msg = f"{o.get('ename', 'Error')}: {o.get('evalue', '')}".strip()
            out.append(msg)
    return out


def read_results(root: Path, assignment: str, student: str) -> AssignmentResult:
    """Per-notebook, per-cell results of one student's assignment.

    A notebook counts as graded only when nbgrader wrote its autograded copy; nbgrader
    deletes that copy when the kernel dies, which is how a crash is told apart from a zero.
    """
    from nbgrader.api import Gradebook, MissingEntry

    root = Path(root)
    gb_url = gradebook_url(root)
    notebooks = []
    with Gradebook(gb_url) as gb:
        assignment_row = gb.find_assignment(assignment)
        for nb_row in sorted(assignment_row.notebooks, key=lambda n: n.name):
            name = nb_row.name + ".ipynb"
            graded_path = root / "autograded" / student / assignment / name
            submitted_path = root / "submitted" / student / assignment / name
            refused = folder_problem(submitted_path.parent) or intake_problem(submitted_path)
            if refused or intake_problem(graded_path, max_bytes=0):
                detail = f"refused at intake: {name}: {refused}" if refused else "the autograded copy is not a file"
                zero = [CellResult(c.name, 0.0, float(c.max_score), "written" if c.cell_type == "markdown" else "tests",
                                   [f"not graded: {detail}"]) for c in nb_row.grade_cells]
                notebooks.append(NotebookResult(name, "failed", zero, detail))
                continue
            if not submitted_path.exists() or not graded_path.exists():
                missing = not submitted_path.exists()
                detail = ("not in the submission" if missing else
                          "did not run to the end (kernel died, or the notebook could not be read)")
                zero = [CellResult(c.name, 0.0, float(c.max_score), "written" if c.cell_type == "markdown" else "tests",
                                   [f"not graded: the notebook {detail}"]) for c in nb_row.grade_cells]
                notebooks.append(NotebookResult(name, "missing" if missing else "failed", zero, detail))
                continue
            graded_nb = nbformat.read(graded_path, as_version=4)
            by_id = {nbs.nbgrader_md(c).get("grade_id"): c for c in graded_nb.cells}
            try:
                sub = gb.find_submission_notebook(nb_row.name, assignment, student)
            except MissingEntry:
                notebooks.append(NotebookResult(name, "failed", detail="no gradebook entry"))
                continue
            cells = []
            for grade in sorted(sub.grades, key=lambda g: _cell_order(graded_nb, g.name)):
                cell = by_id.get(grade.name)
                kind = "written" if grade.cell_type == "markdown" else "tests"
                pts = None if grade.needs_manual_grade else float(grade.score)
                msgs = error_messages(cell) if (cell is not None and kind == "tests") else []
                cells.append(CellResult(grade.name, pts, float(grade.max_score), kind, msgs))
            how = ((graded_nb.metadata.get("tas") or {}).get("graded_in") or "unknown (graded before this version)")
            notebooks.append(NotebookResult(name, "graded", cells, graded_in=str(how)[:60]))
    return AssignmentResult(assignment, student, notebooks)


def _cell_order(nb, grade_id: str) -> int:
    for i, c in enumerate(nb.cells):
        if nbs.nbgrader_md(c).get("grade_id") == grade_id:
            return i
    return 10**6


# ---------------------------------------------------------------- model submissions


def solved_version(release_nb, source_nb, fraction: float = 1.0):
    """The release notebook with the first `fraction` of its answer cells filled with the
    source's solutions (markers removed), as a student who solved them would hand it in."""
    src_by_id = {nbs.nbgrader_md(c).get("grade_id"): c for c in source_nb.cells}
    nb = nbformat.from_dict(nbformat.reads(nbformat.writes(release_nb), as_version=4))
    answers = [c for c in nb.cells if nbs.nbgrader_md(c).get("solution")]
    n_fill = round(len(answers) * fraction)
    for cell in answers[:n_fill]:
        src = src_by_id[nbs.nbgrader_md(cell)["grade_id"]]
        cell.source = nbs.strip_solution_markers(src.source)
    return nb
