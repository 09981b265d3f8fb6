"""The main job: build release/, grade a sample class with stock nbgrader, print the table.

Runs the instructor's real workflow in the course root with the stock command-line tools:

1. `nbgrader generate_assignment A --force` for every assignment (release/ from source/);
2. a sample class in submitted/: a fully solved student, a blank one, a partly solved one
   and one whose kernel dies (`os._exit`) in the first notebook;
3. `nbgrader autograde A --force`; a student whose batch fails is re-graded notebook by
   notebook so that one crashed notebook does not take the others down with it;
4. `nbgrader generate_feedback A --force` and `nbgrader export` (grades.csv);
5. a per-student, per-assignment table from the gradebook in which a notebook that failed
   to run, and written answers waiting for a person, are shown as such, never as a 0.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import nbformat

from . import nbgrader_cmd
from . import notebooks as nbs
from .grader import ensure_tools_on_path, read_results, solved_version
from .paths import assignments, course_root
from .report import write_report

STUDENTS = {
    "s01_solved": "every answer written",
    "s02_blank": "hands in the released notebooks untouched",
    "s03_partial": "answers the first half of each notebook",
    "s04_crash": "solved, but a cell in the first notebook kills the kernel",
}


def nbgrader(*args: str, root: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run a stock nbgrader command in the course root; its log is returned, not printed.
    (Through nbgrader_cmd.py: the same nbgrader, without a 1-3 s import nothing here uses.)"""
    cmd = nbgrader_cmd.command(*args)
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def release(root: Path) -> list[str]:
    """Build release/ from source/ for every assignment (always --force)."""
    names = assignments(root)
    for a in names:
        nbgrader("generate_assignment", a, "--force", root=root)
    return names


def make_submissions(root: Path, assignment: str) -> None:
    for student in STUDENTS:
        folder = root / "submitted" / student / assignment
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text("2026-11-20 12:00:00.000000 UTC")
        for i, rel_path in enumerate(sorted((root / "release" / assignment).glob("*.ipynb"))):
            rel = nbformat.read(rel_path, as_version=4)
            src = nbs.read(root / "source" / assignment / rel_path.name)
            if student == "s01_solved":
                nb = solved_version(rel, src)
            elif student == "s02_blank":
                nb = rel
            elif student == "s03_partial":
                nb = solved_version(rel, src, fraction=0.5)
            else:
                nb = solved_version(rel, src)
                if i == 0:
                    first = next(c for c in nb.cells if nbs.nbgrader_md(c).get("solution") and c.cell_type == "code")
                    first.source += "\n\nimport os\nos._exit(1)  # the kernel dies here"
            (folder / rel_path.name).write_text(nbformat.writes(nb), encoding="utf-8")


def autograde(root: Path, assignment: str) -> list[str]:
    """Autograde the class; returns the students whose batch failed (then re-graded per notebook)."""
    proc = nbgrader("autograde", assignment, "--force", root=root, check=False)
    failed = sorted(set(re.findall(rf"error processing assignment '{re.escape(assignment)}' for student '([^']+)'",
                                   proc.stdout + proc.stderr)))
    for student in failed:
        for nb_path in sorted((root / "submitted" / student / assignment).glob("*.ipynb")):
            nbgrader("autograde", assignment, "--student", student, "--notebook", nb_path.stem, "--force",
                     root=root, check=False)
    return failed


def cell_text(res) -> str:
    if res.failed and len(res.failed) == len(res.notebooks):
        return "FAILED TO RUN"
    text = f"{res.score('tests'):g}/{res.max_score('tests'):g}"
    notes = []
    if res.failed:
        notes.append("failed: " + ",".join(n.name.removesuffix(".ipynb") for n in res.failed))
    if res.pending_manual:
        notes.append(f"+{res.pending_manual:g} to grade by hand")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def table(root: Path, names: list[str], flags: dict[str, set[str]] | None = None) -> str:
    rows = [["student"] + names + (["review"] if flags is not None else [])]
    details = []
    for student in STUDENTS:
        row = [student]
        for a in names:
            res = read_results(root, a, student)
            row.append(cell_text(res))
            for n in res.failed:
                details.append(f"  {student} {a}/{n.name}: {n.detail}")
        if flags is not None:
            row.append("FLAGGED: " + ",".join(sorted(flags[student])) if flags.get(student) else "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    out = "\n".join(lines)
    out += ("\n\nauto-graded points / auto-graded maximum. 'to grade by hand': written answers waiting for "
            "an instructor (formgrader). 'FAILED TO RUN' / 'failed:': the notebook never finished, which "
            "`nbgrader export` shows as a plain 0.")
    if flags:
        out += (" 'FLAGGED': the scanner found code to review by hand in that student's submission "
                "(flags.csv); the grade is unchanged.")
    if details:
        out += "\n\nNot graded:\n" + "\n".join(details)
    return out


def main(root: Path | None = None) -> int:
    root = Path(root or course_root())
    ensure_tools_on_path()
    t0 = time.time()
    names = release(root)
    print(f"release/ built from source/ for {len(names)} assignments ({time.time() - t0:.1f} s)", flush=True)
    for a in names:
        t = time.time()
        make_submissions(root, a)
        failed = autograde(root, a)
        nbgrader("generate_feedback", a, "--force", root=root, check=False)
        extra = f"; batch failed for {', '.join(failed)}, re-graded per notebook" if failed else ""
        print(f"{a}: {len(STUDENTS)} submissions autograded, feedback written ({time.time() - t:.1f} s{extra})",
              flush=True)
    nbgrader("export", root=root)
    print(f"grades exported to {root / 'grades.csv'}")
    rep = write_report(root, students=list(STUDENTS), assignments=names)
    print(f"per question: {root / 'grades_by_question.csv'}; review flags: {root / 'flags.csv'}\n")
    print(table(root, names, rep.flagged()))
    print(f"\ndone in {time.time() - t0:.1f} s")
    return 0
