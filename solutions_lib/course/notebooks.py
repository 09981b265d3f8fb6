"""The course's notebook format: building, reading and normalising nbgrader notebooks.

Source notebooks are stored *normalised*: no outputs, no execution counts, no volatile
metadata, keys sorted, one JSON string per source line. A diff then shows only what an
author changed, and the file is still a plain notebook that JupyterLab and nbgrader's
"Create Assignment" toolbar edit directly. `python -m solutions_lib fmt` normalises;
a test fails when a committed source notebook is not normalised.

Graded cells carry the syllabus ids they cover: ``cell.metadata["syllabus"] = ["TSX-01"]``.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import nbformat

SCHEMA_VERSION = 3
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
_KEEP_CELL_METADATA = {"nbgrader", "syllabus", "tags", "deletable", "editable"}
_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# ---------------------------------------------------------------- building


def _nbgrader_md(grade_id: str, *, grade: bool, solution: bool, locked: bool,
                 points: float | None = None, task: bool = False) -> dict:
    if not _ID_RE.match(grade_id):
        raise ValueError(f"grade_id {grade_id!r} must be 1-64 letters, digits, '-' or '_'")
    md = {"grade": grade, "grade_id": grade_id, "locked": locked,
          "schema_version": SCHEMA_VERSION, "solution": solution, "task": task}
    if grade:
        if points is None or points <= 0:
            raise ValueError(f"graded cell {grade_id!r} needs positive points, got {points!r}")
        md["points"] = points
    return md


def _cell(kind: str, source: str, cell_id: str, metadata: dict | None = None):
    make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    cell = make(source.strip("\n"), metadata=metadata or {})
    cell["id"] = cell_id
    return cell


def markdown(source: str, cell_id: str | None = None, locked: bool = False):
    """A markdown cell: theory or instructions. `locked=True` makes it read-only in nbgrader."""
    cid = cell_id or _auto_id(source)
    md = {"nbgrader": _nbgrader_md(cid, grade=False, solution=False, locked=True)} if locked else {}
    return _cell("markdown", source, cid, md)


def code(source: str, cell_id: str | None = None, locked: bool = False):
    """A plain code cell (setup, demonstration, plot). `locked=True` makes it read-only."""
    cid = cell_id or _auto_id(source)
    md = {"nbgrader": _nbgrader_md(cid, grade=False, solution=False, locked=True)} if locked else {}
    return _cell("code", source, cid, md)


def answer(grade_id: str, source: str):
    """An autograded answer cell: the solution sits between ### BEGIN/END SOLUTION."""
    if "### BEGIN SOLUTION" not in source:
        raise ValueError(f"answer cell {grade_id!r} has no ### BEGIN SOLUTION block")
    return _cell("code", source, grade_id,
                 {"nbgrader": _nbgrader_md(grade_id, grade=False, solution=True, locked=False)})


def tests(grade_id: str, source: str, points: float, syllabus: list[str]):
    """An autograder test cell: visible asserts, then ### BEGIN/END HIDDEN TESTS."""
    return _cell("code", source, grade_id,
                 {"nbgrader": _nbgrader_md(grade_id, grade=True, solution=False, locked=True, points=points),
                  "syllabus": list(syllabus)})


def written(grade_id: str, source: str, points: float, syllabus: list[str]):
    """A manually graded markdown answer: model answer and rubric between ### BEGIN/END SOLUTION."""
    if "### BEGIN SOLUTION" not in source:
        raise ValueError(f"written answer {grade_id!r} has no ### BEGIN SOLUTION block")
    return _cell("markdown", source, grade_id,
                 {"nbgrader": _nbgrader_md(grade_id, grade=True, solution=True, locked=False, points=points),
                  "syllabus": list(syllabus)})


def new_notebook(cells: list) -> nbformat.NotebookNode:
    """A course notebook with the standard kernel metadata; cell ids must be unique."""
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    ids = [c["id"] for c in cells]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"duplicate cell ids: {dup}")
    return nb


def _auto_id(source: str) -> str:
    return "c-" + hashlib.sha1(source.encode()).hexdigest()[:12]


# ---------------------------------------------------------------- normal form


def normalise(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Strip outputs and volatile metadata; give every cell a unique stable id."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    nb.nbformat, nb.nbformat_minor = 4, 5
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    seen: set[str] = set()
    for i, cell in enumerate(nb.cells):
        cell.metadata = {k: v for k, v in cell.get("metadata", {}).items() if k in _KEEP_CELL_METADATA}
        if isinstance(cell.get("source"), list):
            cell.source = "".join(cell.source)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        if not cell.get("attachments"):
            cell.pop("attachments", None)
        cid = cell.get("id")
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid:
            cid = gid
        if not cid or not _ID_RE.match(cid) or cid in seen:
            cid = f"{_auto_id(cell.source)}-{i}"
        cell.id = cid
        seen.add(cid)
    return nb


def dumps(nb: nbformat.NotebookNode) -> str:
    """The stable text of a notebook: sorted keys, one-space indent, trailing newline."""
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def write(nb: nbformat.NotebookNode, path: Path) -> None:
    nbformat.validate(nb)
    Path(path).write_text(dumps(nb), encoding="utf-8")


def read(path: Path) -> nbformat.NotebookNode:
    """Read a notebook; a file that is not notebook JSON raises ValueError saying so."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a text file ({e})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid notebook JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(raw, dict) or "cells" not in raw:
        raise ValueError(f"{path}: JSON but not a notebook (no 'cells' list)")
    try:
        return nbformat.from_dict(nbformat.reads(json.dumps(raw), as_version=4))
    except Exception as e:  # nbformat raises several types for bad structure
        raise ValueError(f"{path}: not a readable notebook ({e})") from None


def is_normalised(path: Path) -> bool:
    text = Path(path).read_text(encoding="utf-8")
    return text == dumps(normalise(nbformat.reads(text, as_version=4)))


# ---------------------------------------------------------------- inspecting


def nbgrader_md(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def graded_cells(nb) -> list:
    """Cells that carry points (autograder tests and manually graded answers)."""
    return [c for c in nb.cells if nbgrader_md(c).get("grade")]


def strip_solution_markers(source: str) -> str:
    """The solution of an answer cell as a student would type it (markers removed)."""
    keep = [ln for ln in source.splitlines() if ln.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]
    return "\n".join(keep)
