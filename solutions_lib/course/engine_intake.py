"""Which course notebook each file of a submission is, before any task is sent (engine.py).

Stock `nbgrader autograde` grades a file only under its course name and fails the whole
student on the first notebook it cannot read. The engine grades each notebook alone, so it
first sorts a submission folder out, on the head, with `lstat` before any `open`
(intake.py's rules: links, FIFOs, devices, oversize files are refused unread):

- a file under its course name is graded as that notebook, unless it is empty, not JSON, or
  another notebook altogether (its cells carry another notebook's nbgrader ids: a notebook of
  another assignment handed in here): then that notebook fails alone, with the reason;
- a file under another name whose ids are those of a course notebook of this assignment
  (`exercises (1).ipynb`, a download renamed by the browser) is graded as that notebook, with a
  note; when the course name is there too (a double submission) the course name is graded and
  the other file is named in a note; two renamed copies of one notebook: it fails with the reason;
- every other regular file (not a notebook, not timestamp.txt) travels with each task, so the
  kernel's folder holds what stock nbgrader would have copied there.

The same recognition as the self-check (selfcheck.identify): overlap of nbgrader grade ids.
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .intake import TIMESTAMP, folder_problem, intake_problem


@dataclass
class Plan:
    """One student's submission of one assignment, sorted out."""
    student: str
    folder: Path
    graded: dict[str, tuple[str, bytes]] = field(default_factory=dict)   # notebook -> (file name, bytes)
    failed: dict[str, str] = field(default_factory=dict)                 # notebook -> why not graded
    missing: list[str] = field(default_factory=list)                     # notebooks not handed in at all
    files: dict[str, bytes] = field(default_factory=dict)                # other files (relative path -> bytes)
    timestamp: str | None = None
    notes: list[str] = field(default_factory=list)                       # renamed, double, ignored files


def grade_ids(nb: dict) -> set[str]:
    out = set()
    for c in nb.get("cells", []) if isinstance(nb, dict) else []:
        md = ((c.get("metadata") or {}).get("nbgrader") or {}) if isinstance(c, dict) else {}
        if isinstance(md, dict) and isinstance(md.get("grade_id"), str):
            out.add(md["grade_id"])
    return out


class Catalogue:
    """The grade ids of every source notebook of the course: {(assignment, notebook): ids}."""

    def __init__(self, root: Path):
        self.ids: dict[tuple[str, str], set[str]] = {}
        for src in sorted((Path(root) / "source").glob("*/*.ipynb")):
            try:
                self.ids[(src.parent.name, src.stem)] = grade_ids(json.loads(src.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue

    def identify(self, nb: dict) -> tuple[str, str] | None:
        """The course notebook with the largest share of its ids in `nb`, or None."""
        ids = grade_ids(nb)
        best, share = None, 0.0
        for key, src_ids in self.ids.items():
            if src_ids:
                s = len(ids & src_ids) / len(src_ids)
                if s > share:
                    best, share = key, s
        return best


def _read(path: Path) -> tuple[dict | None, bytes, str]:
    """(parsed notebook or None, raw bytes, why it cannot be graded or '')."""
    why = intake_problem(path)
    if why:
        return None, b"", f"refused at intake: {path.name} {why}"
    data = path.read_bytes()
    if not data.strip():
        return None, data, f"{path.name} is empty ({len(data)} bytes): nothing to grade"
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return None, data, f"{path.name} is not a notebook (not valid JSON: {str(e)[:120]})"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) or nb.get("nbformat") != 4:
        return None, data, f"{path.name} is not an nbformat-4 notebook"
    return nb, data, ""


def plan_submission(folder: Path, assignment: str, notebooks: list[str], catalogue: Catalogue,
                    ignore: list[str] = (), max_file_bytes: int | None = None) -> Plan:
    """Sort out `folder` (submitted/<student>/<assignment>) for the notebooks `notebooks`
    (names without .ipynb) of `assignment`; see the module docstring."""
    folder = Path(folder)
    plan = Plan(folder.parent.name, folder)
    whole = folder_problem(folder)
    if whole:
        plan.failed = {n: f"refused at intake: {whole}" for n in notebooks}
        return plan
    ts = folder / TIMESTAMP
    if ts.is_file() and not intake_problem(ts, max_bytes=2**16):
        plan.timestamp = ts.read_text(encoding="utf-8", errors="replace").strip() or None
    renamed: dict[str, list[tuple[str, bytes]]] = {}
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        name = path.name
        if name == TIMESTAMP or any(fnmatch.fnmatch(name, pat) for pat in ignore):
            continue
        if path.suffix != ".ipynb":
            continue
        nb, data, why = _read(path)
        stem = path.stem
        if stem in notebooks:
            if why:
                plan.failed[stem] = why
                continue
            ours = catalogue.ids.get((assignment, stem), set())
            found = catalogue.identify(nb)
            if found and found != (assignment, stem) and not (grade_ids(nb) & ours):
                plan.failed[stem] = (f"{name} is not {assignment}/{name}: its cells are those of "
                                     f"{found[0]}/{found[1]}.ipynb (" + ("another notebook under this one's name)" if found[0] == assignment
                                     else "a notebook of another assignment handed in here)"))
                continue
            plan.graded[stem] = (name, data)
            continue
        found = catalogue.identify(nb) if nb is not None else None
        if found and found[0] == assignment and found[1] in notebooks:
            renamed.setdefault(found[1], []).append((name, data))
        elif found:
            plan.notes.append(f"{name} ignored: it is {found[0]}/{found[1]}.ipynb, not part of {assignment}")
        else:
            plan.notes.append(f"{name} ignored: " + (why or "not one of this course's notebooks"))
    for stem, copies in sorted(renamed.items()):
        names = ", ".join(repr(n) for n, _ in copies)
        if stem in plan.graded or stem in plan.failed:
            plan.notes.append(f"double submission of {stem}.ipynb: {names} also hold(s) it; "
                              f"{stem}.ipynb was graded, the other copy ignored")
        elif len(copies) > 1:
            plan.failed[stem] = (f"{len(copies)} files hold {stem}.ipynb ({names}) and none is named "
                                 f"{stem}.ipynb: keep one, named {stem}.ipynb, and grade again")
        else:
            plan.graded[stem] = copies[0]
            plan.notes.append(f"{copies[0][0]!r} graded as {stem}.ipynb (renamed file recognised by its cells)")
    plan.missing = [n for n in notebooks if n not in plan.graded and n not in plan.failed]
    plan.files = other_files(folder, ignore, max_file_bytes, plan.notes)
    return plan


def other_files(folder: Path, ignore, max_file_bytes, notes: list[str]) -> dict[str, bytes]:
    """{relative path: bytes} of the submission's regular files that are not notebooks (what
    nbgrader copies into the kernel's folder); refused files are noted, never opened."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not any(fnmatch.fnmatch(d, p) for p in ignore)
                       and not os.path.islink(os.path.join(dirpath, d))]
        for f in filenames:
            rel = os.path.relpath(os.path.join(dirpath, f), folder)
            if rel == TIMESTAMP or f.endswith(".ipynb") or any(fnmatch.fnmatch(f, p) for p in ignore):
                continue
            why = intake_problem(os.path.join(dirpath, f), max_file_bytes)
            if why:
                notes.append(f"{rel} not copied: {why}")
                continue
            out[rel] = Path(dirpath, f).read_bytes()
    return out
