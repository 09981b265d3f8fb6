"""LMS export: a Canvas gradebook CSV and a plain CSV, where not graded never reads as 0.

`nbgrader export` writes 0.0 for a notebook that never ran, for a written answer nobody has
graded yet, and for a student who has not handed in an assignment that is not due yet. This
export reads the same gradebook through `report.build_report` (which tells a crash from a
zero from the autograded/ folder) and decides one status per student and assignment:

- `graded`: every notebook ran and every written answer has a grade. score = the points of
  all cells (auto-graded and hand-graded) minus nbgrader's late penalty
  (`SubmittedAssignment.late_submission_penalty`, term_late.py; the export refuses while a
  stored penalty is out of date: `term_late apply` first); a notebook missing from an
  otherwise handed-in assignment counts 0 (nbgrader's rule too), and the note says so.
- `failed_to_run`: a notebook did not run to the end or was refused at intake: blank, the
  note names the notebook and the reason (re-grade it, or grade it by hand).
- `awaiting_grader`: a written answer has no grade yet: blank, the note says how many points.
- `missing`: nothing handed in. It is 0 only when the due date (with the student's
  extension) has passed; before it, or when the assignment has no due date, it is blank.

The Canvas CSV has Canvas's import columns: Student ("Last, First"), ID (the Canvas user id:
Student.lms_user_id from the roster's `lms_user_id` column, else blank), SIS User ID (the
nbgrader id), SIS Login ID (the email), Section (a roster CSV's `section` column, with
--roster), then one column per assignment, "Name (canvas id)" when --canvas-ids names the
Canvas assignment (Canvas then updates it), else "Name" (Canvas creates a new assignment);
a second row "Points Possible" as in Canvas's own export. Not graded is an empty cell (never
"EX": excusing is a person's decision). The plain CSV has one row per student and assignment
with the status, score, raw score, penalty, maximum, due date, submission time and the note.

    python -m solutions_lib.course.term_export [--root COURSE] [--out DIR] [--roster roster.csv]
        [--canvas-ids 01_optimizers=1234,02_...=1235] [--assignments A B] [--now "2026-12-20 00:00:00 UTC"]
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
from dataclasses import dataclass, field
from pathlib import Path

PLAIN_FIELDS = ["student", "first_name", "last_name", "email", "assignment", "status", "score", "raw_score",
                "late_penalty", "max_score", "due_utc", "submitted_utc", "note"]
CANVAS_FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


@dataclass
class ExportRow:
    student: str
    assignment: str
    status: str  # graded | failed_to_run | awaiting_grader | missing
    score: float | None  # None: not graded (blank in every CSV)
    raw_score: float | None
    late_penalty: float
    max_score: float
    due: dt.datetime | None
    submitted: dt.datetime | None
    note: str = ""
    names: dict = field(default_factory=dict)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def _num(x: float | None) -> str:
    return "" if x is None else f"{round(x, 2):g}"


def _gradebook_facts(root: Path):
    """Students' names, each assignment's due date and each submission's due date (with the
    extension), timestamp and late penalty, from the gradebook."""
    from nbgrader.api import Gradebook

    from .config import gradebook_url
    from .grader import ensure_tools_on_path

    ensure_tools_on_path()
    people, dues, subs = {}, {}, {}
    with Gradebook(gradebook_url(root)) as gb:
        for s in gb.students:
            people[s.id] = {"first_name": s.first_name or "", "last_name": s.last_name or "",
                            "email": s.email or "", "lms_user_id": s.lms_user_id or ""}
        for a in gb.assignments:
            dues[a.name] = a.duedate
            for sub in a.submissions:
                subs[a.name, sub.student.id] = (sub.duedate, sub.timestamp, float(sub.late_submission_penalty or 0.0))
    return people, dues, subs


def class_rows(root: Path, assignments: list[str] | None = None, now: dt.datetime | None = None,
               rep=None) -> list[ExportRow]:
    """One ExportRow per student and assignment of course `root` (see the module's rules);
    `rep`: a `report.build_report` of the same course and assignments, when the caller has one."""
    from .report import build_report

    root = Path(root)
    now = now or _utcnow()
    rep = rep if rep is not None else build_report(root, assignments=assignments)
    people, dues, subs = _gradebook_facts(root)
    cells: dict[tuple[str, str], list[dict]] = {}
    for q in rep.questions:
        cells.setdefault((q["student"], q["assignment"]), []).append(q)
    out = []
    for (student, a), qs in cells.items():
        max_score = sum(float(q["max_points"]) for q in qs)
        sub_due, stamp, penalty = subs.get((a, student), (dues.get(a), None, 0.0))
        nb_status: dict[str, tuple[str, str]] = {}
        for q in qs:
            nb_status.setdefault(q["notebook"], (q["status"], q["detail"]))
        failed = {n: d for n, (s, d) in nb_status.items() if s == "failed_to_run"}
        missing = sorted(n for n, (s, _) in nb_status.items() if s == "missing")
        pending = [q for q in qs if q["status"] == "needs_manual_grade"]
        row = ExportRow(student, a, "graded", None, None, penalty, max_score, sub_due, stamp,
                        names=people.get(student, {}))
        if failed:
            row.status = "failed_to_run"
            row.note = "; ".join(f"{n} failed to run: {d}" for n, d in sorted(failed.items()))
        elif pending:
            row.status = "awaiting_grader"
            row.note = (f"{len(pending)} written answer(s), {sum(float(q['max_points']) for q in pending):g} "
                        "point(s), await a grader")
        elif len(missing) == len(nb_status):
            row.status, row.late_penalty = "missing", 0.0
            if sub_due is None:
                row.note = "not handed in; no due date set, so not scored"
            elif now > sub_due:
                row.score = row.raw_score = 0.0
                row.note = "not handed in by the due date: 0"
            else:
                row.note = "not handed in; not due yet"
        else:
            raw = sum(float(q["points"]) for q in qs if q["status"] == "graded" and q["points"] != "")
            row.raw_score = raw
            row.score = max(0.0, raw - penalty)
            notes = []
            if missing:
                notes.append(f"not handed in, counted 0: {', '.join(missing)}")
            if penalty:
                notes.append(f"late penalty {penalty:g}")
            row.note = "; ".join(notes)
        out.append(row)
    out.sort(key=lambda r: (r.student, r.assignment))
    return out


def _fmt_time(t: dt.datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S") if t else ""


def write_plain(rows: list[ExportRow], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        w = csv.DictWriter(f, fieldnames=PLAIN_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({"student": r.student, "first_name": r.names.get("first_name", ""),
                        "last_name": r.names.get("last_name", ""), "email": r.names.get("email", ""),
                        "assignment": r.assignment, "status": r.status, "score": _num(r.score),
                        "raw_score": _num(r.raw_score), "late_penalty": _num(r.late_penalty),
                        "max_score": _num(r.max_score), "due_utc": _fmt_time(r.due),
                        "submitted_utc": _fmt_time(r.submitted), "note": r.note})


def read_sections(roster: Path | None) -> dict[str, dict[str, str]]:
    """{id: {"section": ..., "sis_login_id": ...}} from a roster CSV's optional columns."""
    if roster is None:
        return {}
    with open(roster, newline="", encoding="utf-8-sig") as f:
        out = {}
        for row in csv.DictReader(f):
            low = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
            if low.get("id"):
                out[low["id"]] = {"section": low.get("section", ""), "sis_login_id": low.get("sis_login_id", "")}
        return out


def parse_canvas_ids(text: str | None) -> dict[str, str]:
    """'A=1234,B=1235' -> {A: '1234', B: '1235'}; a Canvas id is digits."""
    out = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, cid = part.partition("=")
        if not sep or not cid.strip().isdigit() or not name.strip():
            raise ValueError(f"--canvas-ids: {part!r} is not ASSIGNMENT=DIGITS")
        out[name.strip()] = cid.strip()
    return out


def write_canvas(rows: list[ExportRow], path: Path, canvas_ids: dict[str, str] | None = None,
                 sections: dict[str, dict[str, str]] | None = None) -> None:
    canvas_ids, sections = canvas_ids or {}, sections or {}
    names = sorted({r.assignment for r in rows})
    unknown = sorted(set(canvas_ids) - set(names))
    if unknown:
        raise ValueError(f"--canvas-ids names assignment(s) not in the export: {', '.join(unknown)}")
    cols = [f"{a} ({canvas_ids[a]})" if a in canvas_ids else a for a in names]
    by_student: dict[str, dict[str, ExportRow]] = {}
    for r in rows:
        by_student.setdefault(r.student, {})[r.assignment] = r
    max_by_a = {r.assignment: r.max_score for r in rows}
    with open(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        w = csv.writer(f)
        w.writerow(CANVAS_FIXED + cols)
        w.writerow(["    Points Possible", "", "", "", ""] + [_num(max_by_a[a]) for a in names])
        for student in sorted(by_student):
            got = by_student[student]
            info = next(iter(got.values())).names
            extra = sections.get(student, {})
            display = ", ".join(x for x in (info.get("last_name"), info.get("first_name")) if x) or student
            w.writerow([display, info.get("lms_user_id", ""), student,
                        extra.get("sis_login_id") or info.get("email", ""), extra.get("section", "")]
                       + [_num(got[a].score) if a in got else "" for a in names])


def check_penalties(root: Path, assignments: list[str]) -> None:
    """A ValueError when a stored late penalty is out of date: nbgrader computes it at
    autograde, before the written answers are graded and before a later extension."""
    from .term_late import stale_penalties

    stale = stale_penalties(root, assignments)
    if stale:
        names = sorted({a for a, _ in stale})
        shown = "; ".join(f"{a} {r.student}/{r.notebook}: stored {r.stored or 0:g}, now {r.penalty or 0:g}"
                          for a, r in stale[:5])
        raise ValueError(f"late penalties out of date ({shown}{' ...' if len(stale) > 5 else ''}): written answers "
                         "graded or extensions granted after autograde. Run "
                         + " and ".join(f"`python -m solutions_lib.course.term_late apply {a}`" for a in names)
                         + ", then export again")


def main(argv: list[str] | None = None) -> int:
    from .term_late import parse_due
    from .term_roster import checked_root

    ap = argparse.ArgumentParser(prog="python -m solutions_lib.course.term_export",
                                 description="Write canvas_grades.csv and grades_export.csv (not graded stays blank).")
    ap.add_argument("--root", type=Path, default=None, help="course root (default: this repository)")
    ap.add_argument("--out", type=Path, default=None, help="folder for the CSVs (default: the course root)")
    ap.add_argument("--roster", type=Path, default=None, help="roster CSV with optional section / sis_login_id")
    ap.add_argument("--canvas-ids", default=None, help="ASSIGNMENT=CANVAS_ID[,...]")
    ap.add_argument("--assignments", nargs="*", default=None)
    ap.add_argument("--now", default=None, help="the time the due-date rule uses (default: now), with a zone")
    args = ap.parse_args(argv)
    try:
        root = checked_root(args.root)
        out = Path(args.out or root)
        ids = parse_canvas_ids(args.canvas_ids)
        now = parse_due(args.now) if args.now else None
        rows = class_rows(root, args.assignments, now)
        if not rows:
            raise ValueError(f"nothing to export: no students or no assignments in {root}'s gradebook")
        check_penalties(root, sorted({r.assignment for r in rows}))
        out.mkdir(parents=True, exist_ok=True)
        write_canvas(rows, out / "canvas_grades.csv", ids, read_sections(args.roster))
        write_plain(rows, out / "grades_export.csv")
    except (ValueError, OSError) as e:
        print(f"export: {e}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    print(f"wrote {out / 'canvas_grades.csv'} and {out / 'grades_export.csv'}: "
          + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
