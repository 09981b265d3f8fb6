"""LMS export: Canvas's import columns and a plain CSV, from a small graded class
(tests/term_class.py); a failed, ungraded or not-yet-due assignment is blank, never 0."""
from __future__ import annotations

import csv

import pytest

from solutions_lib.course.term_export import main, parse_canvas_ids

from term_class import NAMES, build_class, fast_gradebooks


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        fast_gradebooks(mp)
        return build_class(tmp_path_factory.mktemp("term_export"))


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_canvas_csv_has_canvas_columns_and_blank_for_not_graded(klass, tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email,section\ns1,Ada,Lovelace,s1@uni.example,Lab 1\n")
    assert main(["--root", str(klass), "--out", str(tmp_path), "--roster", str(roster),
                 "--canvas-ids", "A1=5501", "--now", "2026-02-01 00:00:00 UTC"]) == 0
    assert "1 awaiting_grader, 1 failed_to_run, 4 graded, 6 missing" in capsys.readouterr().out
    rows = _rows(tmp_path / "canvas_grades.csv")
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "A1 (5501)", "A2"]
    assert rows[1] == ["    Points Possible", "", "", "", "", "8", "1"]
    body = {r[2]: r for r in rows[2:]}
    assert body["s1"] == ["Lovelace, Ada", "101", "s1", "s1@uni.example", "Lab 1", "8", "1"]
    assert body["s2"][5:] == ["4.5", ""]          # 2 + 2 + 1 minus the late penalty 0.5; A2 not due yet
    assert body["s3"][5:] == ["0", ""]            # a real zero
    assert body["s4"][5] == ""                    # a written answer awaits a grader
    assert body["s5"][5] == ""                    # failed to run: never 0
    assert body["s6"][5] == "0"                   # nothing handed in, due date passed
    assert sorted(body) == sorted(NAMES) and all("EX" not in r for r in rows)


def test_plain_csv_says_why_each_blank_is_blank(klass, tmp_path):
    assert main(["--root", str(klass), "--out", str(tmp_path), "--now", "2026-02-01 00:00:00 UTC"]) == 0
    with open(tmp_path / "grades_export.csv", newline="") as f:
        plain = {(r["student"], r["assignment"]): r for r in csv.DictReader(f)}
    assert len(plain) == 12
    s2 = plain["s2", "A1"]
    assert (s2["status"], s2["score"], s2["raw_score"], s2["late_penalty"], s2["max_score"]) == \
        ("graded", "4.5", "5", "0.5", "8")
    assert (s2["first_name"], s2["last_name"], s2["due_utc"], s2["submitted_utc"]) == \
        ("Alan", "Turing", "2026-01-10 17:00:00", "2026-01-10 22:00:00")
    s5 = plain["s5", "A1"]
    assert (s5["status"], s5["score"]) == ("failed_to_run", "") and "ex.ipynb failed to run: did not run" in s5["note"]
    s4 = plain["s4", "A1"]
    assert (s4["status"], s4["score"]) == ("awaiting_grader", "") and "2 point(s), await a grader" in s4["note"]
    assert (plain["s6", "A1"]["status"], plain["s6", "A1"]["score"]) == ("missing", "0")
    assert (plain["s6", "A2"]["score"], plain["s6", "A2"]["note"]) == ("", "not handed in; not due yet")


def test_missing_is_zero_only_after_the_due_date(klass, tmp_path):
    assert main(["--root", str(klass), "--out", str(tmp_path), "--now", "2026-03-01 17:00:01 UTC"]) == 0
    body = {r[2]: r for r in _rows(tmp_path / "canvas_grades.csv")[2:]}
    assert [body[s][6] for s in ("s1", "s2", "s3", "s4", "s5", "s6")] == ["1", "0", "0", "0", "0", "0"]
    assert main(["--root", str(klass), "--out", str(tmp_path), "--now", "2026-01-10 16:00:00 UTC"]) == 0
    body = {r[2]: r for r in _rows(tmp_path / "canvas_grades.csv")[2:]}
    assert body["s6"][5] == ""  # before A1's due date


def test_bad_export_arguments_are_refused(klass, tmp_path, capsys):
    with pytest.raises(ValueError, match="not ASSIGNMENT=DIGITS"):
        parse_canvas_ids("A1=abc")
    assert main(["--root", str(klass), "--out", str(tmp_path), "--canvas-ids", "A9=12"]) == 2
    assert "not in the export: A9" in capsys.readouterr().err
    assert main(["--root", str(klass), "--out", str(tmp_path), "--now", "2026-02-01"]) == 2
    assert "no time zone" in capsys.readouterr().err


def test_export_refuses_stale_late_penalties_until_apply(klass, tmp_path, capsys):
    """nbgrader's penalty is computed at autograde: a written answer graded later leaves it
    stale; the export says so and names the command, and exports once it is recomputed."""
    import shutil

    from nbgrader.api import Gradebook

    from solutions_lib.course import term_late

    root = tmp_path / "course"
    shutil.copytree(klass, root)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.find_grade("w1", "ex", "A1", "s2").manual_score = 2.0  # s2: 2 + 2 + 2 = 6, 10 % late = 0.6
        gb.db.commit()
    out = tmp_path / "out"
    assert main(["--root", str(root), "--out", str(out), "--now", "2026-02-01 00:00:00 UTC"]) == 2
    err = capsys.readouterr().err
    assert "A1 s2/ex: stored 0.5, now 0.6" in err and "term_late apply A1" in err
    assert not (out / "canvas_grades.csv").exists()
    assert term_late.main(["--root", str(root), "apply", "A1"]) == 0
    assert main(["--root", str(root), "--out", str(out), "--now", "2026-02-01 00:00:00 UTC"]) == 0
    body = {r[2]: r for r in _rows(out / "canvas_grades.csv")[2:]}
    assert body["s2"][5] == "5.4"
