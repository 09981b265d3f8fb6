"""Due dates, late penalties and per-student extensions, on nbgrader's own mechanism.

nbgrader keeps a due date per assignment (`Assignment.duedate`), a submission time per
student (`timestamp.txt`, written by `nbgrader submit`/`collect`, read by autograde), and an
extension per student and assignment (`SubmittedAssignment.extension`, stock
`Gradebook.grant_extension`). `SubmittedAssignment.total_seconds_late` is the lateness
against the due date plus the extension. During `nbgrader autograde` the preprocessor
`AssignLatePenalties` asks the configured `LateSubmissionPlugin` for each notebook's penalty
and stores it in `SubmittedNotebook.late_submission_penalty`; nbgrader's `score` columns stay
raw, `nbgrader export` writes `late_submission_penalty` beside them.

`PercentPerDayLate` is the course's plugin: a percentage of the notebook's score per started
day late (24 h), capped, after a grace period. Turn it on in nbgrader_config.py:

    c.AssignLatePenalties.plugin_class = "solutions_lib.course.term_late.PercentPerDayLate"
    c.PercentPerDayLate.percent_per_day = 10.0   # of the notebook's score, per started day late
    c.PercentPerDayLate.max_percent = 50.0       # never more than this
    c.PercentPerDayLate.grace_minutes = 15.0     # up to 15 min late is on time

nbgrader computes the penalty once, at autograde, from the score at that moment: written
answers graded by hand later, and an extension granted after autograde, leave it stale.
`apply` recomputes every penalty of an assignment from the gradebook with the configured
plugin, exactly as AssignLatePenalties does (run it after manual grading and before the
export; `extend` runs it for its student).

    python -m solutions_lib.course.term_late due A "2026-12-04 17:00:00 Europe/Berlin"
    python -m solutions_lib.course.term_late extend A STUDENT --days 2 [--hours 6 | --clear]
    python -m solutions_lib.course.term_late apply A
    python -m solutions_lib.course.term_late show A
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float, TraitError, validate

DAY_S = 86_400.0


class LatePolicyError(TraitError, ValueError):
    """A late policy value out of range (a ValueError, so callers may catch either)."""


class PercentPerDayLate(LateSubmissionPlugin):
    """Penalty = score x min(max_percent, percent_per_day x started days late) / 100.

    A day is 24 h counted from the due date (with the student's extension); a submission at
    most `grace_minutes` late has no penalty; 1 s past the grace period counts as one day.
    """

    percent_per_day = Float(10.0, help="Percent of the notebook's score lost per started day late.").tag(config=True)
    max_percent = Float(50.0, help="Cap on the total late penalty, in percent of the score.").tag(config=True)
    grace_minutes = Float(0.0, help="Minutes late that count as on time.").tag(config=True)

    @validate("percent_per_day", "max_percent")
    def _percent(self, proposal):
        v = proposal["value"]
        if not (0.0 <= v <= 100.0) or math.isnan(v):
            raise LatePolicyError(f"PercentPerDayLate.{proposal['trait'].name} must be in [0, 100], got {v!r}")
        return v

    @validate("grace_minutes")
    def _grace(self, proposal):
        v = proposal["value"]
        if not v >= 0.0:
            raise LatePolicyError(f"PercentPerDayLate.grace_minutes must be >= 0, got {v!r}")
        return v

    def days_late(self, total_seconds_late: float) -> int:
        """Started days late, 0 within the grace period."""
        if total_seconds_late <= self.grace_minutes * 60.0:
            return 0
        return math.ceil(total_seconds_late / DAY_S)

    def percent(self, total_seconds_late: float) -> float:
        return min(self.max_percent, self.percent_per_day * self.days_late(total_seconds_late))

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        pct = self.percent(total_seconds_late)
        if self.log:
            self.log.info("late penalty for %s: %s s late, %g%% of %s", student_id, total_seconds_late, pct, score)
        return round(float(score or 0.0) * pct / 100.0, 6)


# ---------------------------------------------------------------- configuration


def load_course_config(root: Path):
    """The traitlets Config that stock nbgrader commands read from `<root>/nbgrader_config.py`."""
    from traitlets.config.loader import PyFileConfigLoader

    root = Path(root)
    if not (root / "nbgrader_config.py").is_file():
        raise ValueError(f"no nbgrader_config.py in {root}: not a course root")
    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


def course_plugin(root: Path, config=None):
    """The late-submission plugin autograde uses in course `root` (nbgrader's AssignLatePenalties
    builds it the same way); stock LateSubmissionPlugin ('none') when none is configured."""
    from nbgrader.preprocessors import AssignLatePenalties

    alp = AssignLatePenalties(config=config if config is not None else load_course_config(root))
    alp.init_plugin()
    return alp.plugin_inst


def _gradebook(root: Path):
    from nbgrader.api import Gradebook

    from .config import COURSE_ID, gradebook_url
    from .grader import ensure_tools_on_path

    ensure_tools_on_path()
    # the course id nbgrader_config.py sets: an assignment created here (a due date set before
    # generate_assignment) belongs to the course the Formgrader shows
    return Gradebook(gradebook_url(root), COURSE_ID)


# ---------------------------------------------------------------- operations


def parse_due(text: str) -> dt.datetime:
    """nbgrader's timestamp format ("2026-12-04 17:00:00 Europe/Berlin", ISO 8601 with an offset):
    naive UTC. A time without a zone is refused: a due date off by the local offset is silent."""
    from nbgrader.utils import parse_utc

    s = text.strip()
    has_zone = len(s.split(" ")) == 3 or s.endswith("Z") or "+" in s[10:] or "-" in s[10:]
    if not has_zone:
        raise ValueError(f"due date {text!r} has no time zone: write e.g. '2026-12-04 17:00:00 UTC' or "
                         "'2026-12-04 17:00:00 Europe/Berlin' or '2026-12-04T17:00:00+01:00'")
    try:
        return parse_utc(s)
    except (ValueError, OverflowError, TypeError) as e:
        raise ValueError(f"cannot read due date {text!r}: {e}") from None


def set_due(root: Path, assignment: str, when: str | None) -> dt.datetime | None:
    """Set (or clear, with None) the assignment's due date in the gradebook."""
    root = Path(root)
    if not (root / "source" / assignment).is_dir():
        raise ValueError(f"no assignment {assignment!r} under {root / 'source'}")
    due = parse_due(when) if when else None
    with _gradebook(root) as gb:
        gb.update_or_create_assignment(assignment, duedate=due)
    return due


def extend(root: Path, assignment: str, student: str, days: float = 0, hours: float = 0) -> None:
    """nbgrader's extension (replaces any earlier one; 0 and 0 removes it), then the student's
    penalties recomputed. nbgrader keeps extensions on the submission, so the student's
    submission must be in the gradebook (collected and autograded)."""
    from nbgrader.api import MissingEntry

    if days < 0 or hours < 0:
        raise ValueError(f"an extension is not negative (days={days}, hours={hours})")
    with _gradebook(root) as gb:
        try:
            gb.find_student(student)
            a = gb.find_assignment(assignment)
        except MissingEntry:
            raise ValueError(f"no student {student!r} or no assignment {assignment!r} in the gradebook") from None
        if a.duedate is None:
            raise ValueError(f"{assignment!r} has no due date: set one first (term_late due {assignment} ...)")
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            raise ValueError(f"{student!r} has no submission of {assignment!r} in the gradebook yet: nbgrader keeps "
                             "extensions on a submission; collect and autograde it first, then extend "
                             "(the penalty is recomputed then)") from None
        gb.grant_extension(assignment, student, days=days, hours=hours)
    apply_penalties(root, assignment, students=[student])


@dataclass
class LateRow:
    student: str
    notebook: str
    due: dt.datetime | None
    submitted: dt.datetime | None
    seconds_late: float
    score: float
    penalty: float | None
    stored: float | None = None  # apply_penalties: the penalty held before


def apply_penalties(root: Path, assignment: str, plugin=None, students: list[str] | None = None,
                    dry_run: bool = False) -> list[LateRow]:
    """Recompute every notebook's late penalty of `assignment` from the gradebook, as
    nbgrader's AssignLatePenalties does at autograde (same plugin, same clamping to
    [0, score], None when on time). `dry_run` computes and writes nothing; each row's
    `stored` is the penalty the gradebook held before."""
    from nbgrader.api import MissingEntry

    plugin = plugin if plugin is not None else course_plugin(root)
    rows = []
    with _gradebook(root) as gb:
        try:
            a = gb.find_assignment(assignment)
        except MissingEntry:
            raise ValueError(f"no assignment {assignment!r} in the gradebook") from None
        for sub in sorted(a.submissions, key=lambda s: s.student.id):
            if students is not None and sub.student.id not in students:
                continue
            late = sub.total_seconds_late
            for nb in sorted(sub.notebooks, key=lambda n: n.name):
                score = float(nb.score or 0.0)
                penalty = None
                if late > 0:
                    penalty = plugin.late_submission_penalty(sub.student.id, score, late)
                    if penalty is not None:
                        penalty = min(max(float(penalty), 0.0), score)
                stored = nb.late_submission_penalty
                if not dry_run:
                    nb.late_submission_penalty = penalty
                rows.append(LateRow(sub.student.id, nb.name, sub.duedate, sub.timestamp, late, score, penalty, stored))
        if dry_run:
            gb.db.rollback()
        else:
            gb.db.commit()
    return rows


def stale_penalties(root: Path, assignments: list[str], plugin=None) -> list[tuple[str, LateRow]]:
    """(assignment, row) for every notebook whose stored penalty differs from what the
    configured plugin gives now (a written answer graded, or an extension granted, since
    autograde; or the policy changed)."""
    plugin = plugin if plugin is not None else course_plugin(root)
    out = []
    for a in assignments:
        for r in apply_penalties(root, a, plugin, dry_run=True):
            if abs((r.penalty or 0.0) - (r.stored or 0.0)) > 1e-9:
                out.append((a, r))
    return out


def late_table(root: Path, assignment: str) -> list[LateRow]:
    """What the gradebook holds now, per student and notebook (nothing recomputed)."""
    rows = []
    with _gradebook(root) as gb:
        for sub in sorted(gb.find_assignment(assignment).submissions, key=lambda s: s.student.id):
            for nb in sorted(sub.notebooks, key=lambda n: n.name):
                rows.append(LateRow(sub.student.id, nb.name, sub.duedate, sub.timestamp, sub.total_seconds_late,
                                    float(nb.score or 0.0), nb.late_submission_penalty))
    return rows


def format_rows(rows: list[LateRow]) -> str:
    out = [f"{'student':<20} {'notebook':<20} {'due (UTC)':<19} {'submitted (UTC)':<19} {'h late':>7} "
           f"{'score':>7} {'penalty':>7}"]
    for r in rows:
        fmt = (lambda t: t.strftime("%Y-%m-%d %H:%M:%S") if t else "-")
        out.append(f"{r.student:<20} {r.notebook:<20} {fmt(r.due):<19} {fmt(r.submitted):<19} "
                   f"{r.seconds_late / 3600:>7.1f} {r.score:>7g} {'-' if r.penalty is None else f'{r.penalty:g}':>7}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from .term_roster import checked_root

    ap = argparse.ArgumentParser(prog="python -m solutions_lib.course.term_late",
                                 description="Due dates, extensions and late penalties (nbgrader's late plugin).")
    ap.add_argument("--root", type=Path, default=None, help="course root (default: this repository)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("due", help="set an assignment's due date (with a time zone)")
    p.add_argument("assignment")
    p.add_argument("when", nargs="?", help="e.g. '2026-12-04 17:00:00 Europe/Berlin'; omit with --clear")
    p.add_argument("--clear", action="store_true", help="remove the due date")
    p = sub.add_parser("extend", help="give one student an extension (replaces an earlier one)")
    p.add_argument("assignment")
    p.add_argument("student")
    p.add_argument("--days", type=float, default=0.0)
    p.add_argument("--hours", type=float, default=0.0)
    p.add_argument("--clear", action="store_true", help="remove the extension")
    p = sub.add_parser("apply", help="recompute the late penalties of an assignment (after manual grading)")
    p.add_argument("assignment")
    p = sub.add_parser("show", help="due dates, lateness and penalties in the gradebook")
    p.add_argument("assignment")
    args = ap.parse_args(argv)
    try:
        root = checked_root(args.root)
        if args.cmd == "due":
            if bool(args.when) == bool(args.clear):
                raise ValueError("give a due date or --clear")
            due = set_due(root, args.assignment, None if args.clear else args.when)
            print(f"{args.assignment}: due " + (f"{due:%Y-%m-%d %H:%M:%S} UTC" if due else "date removed"))
        elif args.cmd == "extend":
            if args.clear == bool(args.days or args.hours):
                raise ValueError("give --days and/or --hours, or --clear")
            extend(root, args.assignment, args.student, args.days, args.hours)
            print(format_rows([r for r in late_table(root, args.assignment) if r.student == args.student]))
        elif args.cmd == "apply":
            print(format_rows(apply_penalties(root, args.assignment)))
        else:
            print(format_rows(late_table(root, args.assignment)))
    except ValueError as e:
        print(f"term_late {args.cmd}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
