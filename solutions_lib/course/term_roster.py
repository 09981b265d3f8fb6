"""Roster import: a class list (CSV) -> nbgrader students with names and emails.

Without it the Formgrader lists every student as "None, None": `nbgrader autograde --create`
makes a student from the submission folder's name only. This tool reads the registrar's (or
the LMS's) CSV, checks every row before anything is written, and creates or updates the
students in the course's gradebook through nbgrader's Gradebook API (SQLite or $TAS_DB_URL,
`config.gradebook_url`). Running it twice changes nothing the second time (idempotent);
a student in the gradebook but not in the CSV is reported, never deleted (their grades stay).

CSV: a header row with at least `id, first_name, last_name, email` (any order, any case;
extra columns are ignored, except `lms_user_id`, kept as nbgrader's Student.lms_user_id: the
Canvas user id that the Canvas export writes in its ID column). A bad id, a duplicate id, a
malformed email or a missing column is a ValueError naming the line; nothing is imported then.

Stock nbgrader has `nbgrader db student import FILE.csv` too: it does not check ids (a
duplicate id silently keeps the last row, an id with a slash makes a folder nobody can grade)
and reports nothing; this is the checked version of the same operation.

    python -m solutions_lib.course.term_roster roster.csv [--root COURSE] [--dry-run]
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REQUIRED = ("id", "first_name", "last_name", "email")
OPTIONAL = ("lms_user_id",)

#: nbgrader uses the id as a folder name (submitted/<id>/, autograded/<id>/) and in URLs of
#: the Formgrader: letters, digits and . _ @ + - only, not starting with a dot or a dash.
ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@+-]{0,127}$")
EMAIL_RE = re.compile(r"^[^@\s,;<>]+@[^@\s,;<>]+\.[^@\s,;<>]+$")


@dataclass(frozen=True)
class RosterRow:
    id: str
    first_name: str
    last_name: str
    email: str
    lms_user_id: str | None = None
    line: int = 0  # line of the CSV file (the header is line 1)

    def fields(self) -> dict:
        """The Student columns this row sets."""
        out = {"first_name": self.first_name, "last_name": self.last_name, "email": self.email or None}
        if self.lms_user_id:
            out["lms_user_id"] = self.lms_user_id
        return out


@dataclass
class ImportSummary:
    added: list[str]
    updated: list[str]
    unchanged: list[str]
    not_on_roster: list[str]

    def text(self) -> str:
        lines = [f"roster: {len(self.added)} added, {len(self.updated)} updated, {len(self.unchanged)} unchanged"]
        if self.not_on_roster:
            lines.append(f"in the gradebook but not on the roster (kept, grades untouched): "
                         f"{', '.join(self.not_on_roster)}")
        return "\n".join(lines)


def read_roster(path: Path) -> list[RosterRow]:
    """Every row of the CSV at `path`, checked; a ValueError names the first bad line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # Excel writes a BOM
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); save the roster as CSV UTF-8") from None
    reader = csv.reader(text.splitlines())
    try:
        header = next(reader)
    except StopIteration:
        raise ValueError(f"{path}: empty file, expected a header row with {', '.join(REQUIRED)}") from None
    names = [h.strip().lower() for h in header]
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise ValueError(f"{path}: line 1 (header) lacks column(s) {', '.join(missing)}; "
                         f"found {', '.join(repr(h) for h in header)}; needed {', '.join(REQUIRED)}")
    dup_cols = sorted({n for n in names if names.count(n) > 1 and n in REQUIRED + OPTIONAL})
    if dup_cols:
        raise ValueError(f"{path}: line 1 (header) names column(s) {', '.join(dup_cols)} twice")
    col = {n: names.index(n) for n in REQUIRED + OPTIONAL if n in names}
    rows: list[RosterRow] = []
    seen: dict[str, int] = {}
    for line, raw in enumerate(reader, start=2):
        if not any(v.strip() for v in raw):
            continue  # blank line
        if len(raw) < len(header):
            raw = raw + [""] * (len(header) - len(raw))
        get = {n: raw[i].strip() for n, i in col.items()}
        sid = get["id"]
        if not sid:
            raise ValueError(f"{path}: line {line}: empty id")
        if not ID_RE.match(sid):
            raise ValueError(f"{path}: line {line}: bad id {sid!r}: an nbgrader student id is a folder name, "
                             "use letters, digits and . _ @ + - only (not starting with . or -, at most 128)")
        if sid in seen:
            raise ValueError(f"{path}: line {line}: duplicate id {sid!r} (first on line {seen[sid]})")
        seen[sid] = line
        email = get["email"]
        if email and not EMAIL_RE.match(email):
            raise ValueError(f"{path}: line {line}: bad email {email!r} for id {sid!r}")
        for n in ("first_name", "last_name", "email"):
            if len(get[n]) > 128:
                raise ValueError(f"{path}: line {line}: {n} longer than 128 characters (nbgrader's limit)")
        rows.append(RosterRow(sid, get["first_name"], get["last_name"], email,
                              get.get("lms_user_id") or None, line))
    if not rows:
        raise ValueError(f"{path}: no students (only a header)")
    return rows


def import_roster(root: Path, rows: list[RosterRow], dry_run: bool = False) -> ImportSummary:
    """Create or update one nbgrader Student per row in course `root`'s gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    from .config import gradebook_url
    from .grader import ensure_tools_on_path

    ensure_tools_on_path()  # a new gradebook runs `alembic` from PATH: works without an activated venv
    added, updated, unchanged = [], [], []
    with Gradebook(gradebook_url(root)) as gb:
        existing = {s.id for s in gb.students}
        for row in rows:
            want = row.fields()
            try:
                st = gb.find_student(row.id)
            except MissingEntry:
                added.append(row.id)
            else:
                if all(getattr(st, k) == v for k, v in want.items()):
                    unchanged.append(row.id)
                    continue
                updated.append(row.id)
            if not dry_run:
                gb.update_or_create_student(row.id, **want)
        on_roster = {r.id for r in rows}
        return ImportSummary(added, updated, unchanged, sorted(existing - on_roster))


def checked_root(arg: Path | None) -> Path:
    """--root, or the course this package belongs to; a ValueError unless it is a course root."""
    from .paths import course_root

    try:
        root = Path(arg) if arg else course_root()
    except FileNotFoundError as e:
        raise ValueError(str(e)) from None
    if not (root / "nbgrader_config.py").is_file():
        raise ValueError(f"{root} is not a course root (no nbgrader_config.py there)")
    return root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m solutions_lib.course.term_roster",
                                 description="Import a class roster (CSV: id, first_name, last_name, email "
                                             "[, lms_user_id]) into the course's nbgrader gradebook.")
    ap.add_argument("csv", type=Path, help="the roster CSV")
    ap.add_argument("--root", type=Path, default=None, help="course root (default: this repository)")
    ap.add_argument("--dry-run", action="store_true", help="check and report, write nothing")
    args = ap.parse_args(argv)
    try:
        root = checked_root(args.root)
        rows = read_roster(args.csv)
    except (ValueError, OSError) as e:
        print(f"roster not imported: {e}", file=sys.stderr)
        return 2
    summary = import_roster(root, rows, dry_run=args.dry_run)
    print(("(dry run) " if args.dry_run else "") + summary.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
