"""Grade report: per question, per student, and the scanner's flags, from the gradebook.

`nbgrader export` writes one number per student and assignment, and a notebook that never
ran shows there as 0. This report reads the gradebook and the autograded/ folder (through
`grader.read_results`) and writes, in the course root:

- `grades_by_question.csv`: student, assignment, notebook, grade_id, kind, points, max_points,
  status, flags. status is `graded`, `failed_to_run` (the kernel died or timed out for
  good, or nbgrader rejected the notebook: no autograded copy, or no gradebook entry),
  `needs_manual_grade` (a written answer waiting for a person) or `missing` (not handed in);
  points is empty unless the status is `graded`, so a failure is never read as a 0.
- `grades_by_student.csv`: one row per student and assignment with the auto-graded points
  of the notebooks that ran, the maximum, the failed and missing notebooks, the points
  waiting for a person, and the number of flags; status `graded`, `partly_failed`,
  `failed_to_run` or `missing`.
- `flags.csv`: every scanner finding (`scanner.py`) in every submitted notebook: student,
  assignment, notebook, cell, line, rule, snippet. A scanner flag asks for a human look; it
  changes no grade. Rule `check_records` marks a test cell the grader itself failed because
  its checks left no record or a wrong one (integrity.py; cell = its grade_id). Rule
  `copied_library` marks an answer whose function or class is mostly code of `solutions_lib`
  (a reference, or a course copy students hold), rule `similar_answers` two students whose
  versions of one answer cell are mostly the same code (`copycheck.py`; snippet: with what).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from . import copycheck
from .config import gradebook_url
from .grader import NotebookResult, read_results
from .intake import intake_problem
from .scanner import Finding, read_notebook, release_for, scan_file

QUESTION_FIELDS = ["student", "assignment", "notebook", "grade_id", "kind", "points", "max_points", "status",
                   "flags", "detail"]
STUDENT_FIELDS = ["student", "assignment", "status", "points", "max_points", "failed_to_run", "missing",
                  "manual_pending_points", "flags", "flag_rules", "graded_in"]
FLAG_FIELDS = ["student", "assignment", "notebook", "cell", "line", "rule", "snippet"]


@dataclass
class Report:
    questions: list[dict] = field(default_factory=list)
    students: list[dict] = field(default_factory=list)
    flags: list[dict] = field(default_factory=list)

    def flagged(self) -> dict[str, set[str]]:
        """{student: rules found in their submissions}."""
        out: dict[str, set[str]] = {}
        for f in self.flags:
            out.setdefault(f["student"], set()).add(f["rule"])
        return out


def _gradebook_layout(root: Path) -> tuple[list[str], dict[str, dict[str, list[tuple[str, float, str]]]]]:
    """Students and {assignment: {notebook: [(grade_id, max_points, kind)]}} from the gradebook."""
    from nbgrader.api import Gradebook

    layout = {}
    with Gradebook(gradebook_url(root)) as gb:
        students = [s.id for s in gb.students]
        for a in gb.assignments:
            layout[a.name] = {nb.name + ".ipynb": [(gc.name, float(gc.max_score),
                                                    "written" if gc.cell_type == "markdown" else "tests")
                                                   for gc in nb.grade_cells]
                              for nb in a.notebooks}
    return students, layout


def _integrity_flags(path: Path) -> list[tuple[str, str]]:
    """Test cells the grader failed because their check records were missing or wrong."""
    import nbformat

    from .integrity import integrity_flags
    try:
        return integrity_flags(nbformat.read(path, as_version=4))
    except Exception:  # noqa: BLE001  (an unreadable autograded copy is reported elsewhere)
        return []


def _notebooks(folder: Path) -> list[Path]:
    """The *.ipynb in `folder`, sorted; none when it cannot be listed (reported elsewhere)."""
    try:
        return sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
    except OSError:
        return []


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return True  # there but unreadable: read_results says why


def _results(root: Path, a: str, student: str, names) -> dict:
    """{notebook: NotebookResult}; a student whose results cannot be read (a hostile or broken
    autograded copy) has every notebook failed, with the reason, and the class goes on."""
    try:
        return {n.name: n for n in read_results(root, a, student).notebooks}
    except Exception as e:  # noqa: BLE001
        why = f"the results cannot be read: {type(e).__name__}: {e}"[:300]
        return {n: NotebookResult(n, "failed", detail=why) for n in names}


def _fmt(x: float) -> str:
    return f"{x:g}"


def build_report(root: Path, students: list[str] | None = None, assignments: list[str] | None = None) -> Report:
    root = Path(root)
    gb_students, layout = _gradebook_layout(root)
    submitted = root / "submitted"
    if students is None:
        found = {p.name for p in submitted.iterdir() if p.is_dir()} if submitted.is_dir() else set()
        students = sorted(set(gb_students) | found)
    names = sorted(layout) if assignments is None else [a for a in assignments if a in layout]
    rep = Report()
    answers: dict[tuple[str, str, str], dict[str, list]] = {}   # (assignment, notebook, grade_id) -> {student: units}
    for student in students:
        for a in names:
            sub_dir = submitted / student / a
            nb_flags: dict[str, list] = {}
            for nb_path in _notebooks(sub_dir):
                if intake_problem(nb_path):  # refused at intake (link, FIFO, device, too big): never opened
                    continue
                found = scan_file(nb_path, root)
                for gid, units, copied in _copies(nb_path, root):
                    answers.setdefault((a, nb_path.name, gid), {})[student] = units
                    found += [Finding(gid, m.line, "copied_library",
                                      f"{m.unit} is {m.shared:.0%} the code of {m.other}") for m in copied]
                for f in found:
                    nb_flags.setdefault(nb_path.name, []).append(f)
                    rep.flags.append({"student": student, "assignment": a, "notebook": nb_path.name,
                                      "cell": f.cell, "line": f.line, "rule": f.rule, "snippet": f.snippet})
            for nb_path in _notebooks(root / "autograded" / student / a):
                if intake_problem(nb_path, max_bytes=0):  # only files nbgrader wrote are read
                    continue
                for gid, problem in _integrity_flags(nb_path):
                    f = Finding(gid, 0, "check_records", problem[:200])
                    nb_flags.setdefault(nb_path.name, []).append(f)
                    rep.flags.append({"student": student, "assignment": a, "notebook": nb_path.name,
                                      "cell": f.cell, "line": f.line, "rule": f.rule, "snippet": f.snippet})
            by_nb = _results(root, a, student, layout[a]) if _is_dir(sub_dir) else {}
            points = max_points = manual = 0.0
            failed, missing, ran = [], [], 0
            for nb_name, cells in sorted(layout[a].items()):
                nbres = by_nb.get(nb_name)
                nb_status = nbres.status if nbres else "missing"
                status = {"graded": "graded", "failed": "failed_to_run"}.get(nb_status, "missing")
                if status == "failed_to_run":
                    failed.append(nb_name)
                elif status == "missing":
                    missing.append(nb_name)
                else:
                    ran += 1
                got = {c.grade_id: c for c in nbres.cells} if (nbres and status == "graded") else {}
                rules = ";".join(sorted({f.rule for f in nb_flags.get(nb_name, [])}))
                for gid, mx, kind in cells:
                    cell = got.get(gid)
                    row_status, pts = status, ""
                    if status == "graded":
                        if cell is None or cell.points is None:
                            row_status = "needs_manual_grade"
                            manual += mx
                        else:
                            pts = _fmt(cell.points)
                            if kind == "tests":
                                points += cell.points
                    if kind == "tests":
                        max_points += mx
                    rep.questions.append({
                        "student": student, "assignment": a, "notebook": nb_name, "grade_id": gid, "kind": kind,
                        "points": pts, "max_points": _fmt(mx), "status": row_status, "flags": rules,
                        "detail": nbres.detail if (nbres and status != "graded") else
                        ("not in the submission" if status == "missing" else "")})
            n_nb = len(layout[a])
            if ran == n_nb:
                overall = "graded"
            elif ran:
                overall = "partly_failed" if failed else "graded_partly_missing"
            else:
                overall = "failed_to_run" if failed else "missing"
            all_flags = [f for fs in nb_flags.values() for f in fs]
            rep.students.append({
                "student": student, "assignment": a, "status": overall,
                "points": _fmt(points) if ran else "", "max_points": _fmt(max_points),
                "failed_to_run": ";".join(failed), "missing": ";".join(missing),
                "manual_pending_points": _fmt(manual), "flags": len(all_flags),
                "flag_rules": ";".join(sorted({f.rule for f in all_flags})),
                "graded_in": ";".join(sorted({r.graded_in for r in by_nb.values() if r and r.graded_in}))})
    _add_similar(rep, answers)
    return rep


def _copies(nb_path: Path, root: Path) -> list[tuple[str, list, list]]:
    """(grade_id, units, matches with solutions_lib) per answer cell of a submission; nothing
    for a notebook the scanner cannot read (it reports that itself)."""
    try:
        nb = read_notebook(nb_path)
        release = release_for(nb_path, root)
    except Exception:  # noqa: BLE001  (CannotAnalyse and worse: the scanner's `unreadable` says why)
        return []
    out = []
    for gid, src, given in copycheck.answer_cells(nb, release):
        out.append((gid, copycheck.answer_units(src, given), copycheck.copied_library(src, given)))
    return out


def _add_similar(rep: Report, answers: dict) -> None:
    """Flag pairs of students with mostly the same code in one answer cell, and count the flags
    in their rows (a similarity is known only once the whole class has been read)."""
    added: dict[tuple[str, str, str], int] = {}
    for (a, nb_name, gid), by_student in sorted(answers.items()):
        for student, m in copycheck.similar_answers(by_student):
            rep.flags.append({"student": student, "assignment": a, "notebook": nb_name, "cell": gid,
                              "line": m.line, "rule": "similar_answers",
                              "snippet": f"{m.unit} is {m.shared:.0%} the code of {m.other}"})
            added[student, a, nb_name] = added.get((student, a, nb_name), 0) + 1
    if not added:
        return
    for row in rep.students:
        n = sum(v for (s, a, _), v in added.items() if (s, a) == (row["student"], row["assignment"]))
        if n:
            row["flags"] += n
            row["flag_rules"] = ";".join(sorted({*filter(None, row["flag_rules"].split(";")), "similar_answers"}))
    for row in rep.questions:
        if (row["student"], row["assignment"], row["notebook"]) in added:
            row["flags"] = ";".join(sorted({*filter(None, row["flags"].split(";")), "similar_answers"}))


def _write(path: Path, fields: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:  # undecodable names
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def write_report(root: Path, out_dir: Path | None = None, students: list[str] | None = None,
                 assignments: list[str] | None = None) -> Report:
    """Build the report and write grades_by_question.csv, grades_by_student.csv, flags.csv."""
    root = Path(root)
    out = Path(out_dir or root)
    rep = build_report(root, students, assignments)
    _write(out / "grades_by_question.csv", QUESTION_FIELDS, rep.questions)
    _write(out / "grades_by_student.csv", STUDENT_FIELDS, rep.students)
    _write(out / "flags.csv", FLAG_FIELDS, rep.flags)
    return rep
