"""Roster import: a CSV becomes nbgrader students with names, read back through the same API
the Formgrader lists students with; bad rows are refused before anything is written."""
from __future__ import annotations

import pytest

from solutions_lib.course.grader import Course
from solutions_lib.course.term_roster import import_roster, main, read_roster

from term_class import fast_gradebooks

ROSTER = ("ID,First_Name,Last_Name,Email,lms_user_id,section\n"
          "alice,Alice,Liddell,alice@uni.example,101,A\n"
          "bob.k,Bob,Kahn,bob@uni.example,,B\n"
          "\n"
          "zoë,Zoë,Ng,zoe@uni.example,103,A\n")


@pytest.fixture(autouse=True)
def _fast_new_gradebooks(monkeypatch):
    fast_gradebooks(monkeypatch)


def _students(root):
    """What the Formgrader's student list shows (NbGraderAPI.get_students)."""
    api = Course(root).api
    return {s["id"]: s for s in api.get_students()}


def test_roster_import_names_students_in_formgrader_and_is_idempotent(fixture_course, tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER.replace("zoë,Zoë", "zoe,Zoë"), encoding="utf-8")
    # a student autograde created from a folder name: "None, None" until the roster names them
    (fixture_course / "submitted" / "alice" / "00_fixture").mkdir(parents=True)
    before = _students(fixture_course)
    assert (before["alice"]["first_name"], before["alice"]["last_name"]) == (None, None)

    assert main([str(roster), "--root", str(fixture_course)]) == 0
    assert "3 added, 0 updated, 0 unchanged" in capsys.readouterr().out
    got = _students(fixture_course)
    assert {k: (v["first_name"], v["last_name"], v["email"], v["lms_user_id"]) for k, v in got.items()} == {
        "alice": ("Alice", "Liddell", "alice@uni.example", "101"),
        "bob.k": ("Bob", "Kahn", "bob@uni.example", None),
        "zoe": ("Zoë", "Ng", "zoe@uni.example", "103")}

    # the same file again: nothing changes; a corrected name is one update
    assert main([str(roster), "--root", str(fixture_course)]) == 0
    assert "0 added, 0 updated, 3 unchanged" in capsys.readouterr().out
    roster.write_text(ROSTER.replace("zoë,Zoë", "zoe,Zoë").replace("Kahn", "Khan"), encoding="utf-8")
    summary = import_roster(fixture_course, read_roster(roster))
    assert (summary.added, summary.updated, len(summary.unchanged)) == ([], ["bob.k"], 2)
    assert _students(fixture_course)["bob.k"]["last_name"] == "Khan"

    # a student dropped from the roster is reported, not deleted
    roster.write_text("id,first_name,last_name,email\nalice,Alice,Liddell,alice@uni.example\n")
    summary = import_roster(fixture_course, read_roster(roster))
    assert summary.not_on_roster == ["bob.k", "zoe"] and len(_students(fixture_course)) == 3


@pytest.mark.parametrize("text, message", [
    ("id,first_name,email\nalice,Alice,a@x.org\n", "line 1 (header) lacks column(s) last_name"),
    ("id,first_name,last_name,email\nalice,A,L,a@x.org\nbob,B,K,b@x.org\nalice,A2,L2,a2@x.org\n",
     "line 4: duplicate id 'alice' (first on line 2)"),
    ("id,first_name,last_name,email\nalice,A,L,a@x.org\n../evil,E,V,e@x.org\n", "line 3: bad id '../evil'"),
    ("id,first_name,last_name,email\nalice smith,A,L,a@x.org\n", "line 2: bad id 'alice smith'"),
    ("id,first_name,last_name,email\n,A,L,a@x.org\n", "line 2: empty id"),
    ("id,first_name,last_name,email\nalice,A,L,not-an-email\n", "line 2: bad email 'not-an-email'"),
    ("id,first_name,last_name,email\n", "no students"),
    ("", "empty file"),
])
def test_bad_roster_names_the_line_and_writes_nothing(fixture_course, tmp_path, capsys, text, message):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        read_roster(roster)
    assert main([str(roster), "--root", str(fixture_course)]) == 2
    assert message in capsys.readouterr().err
    assert not (fixture_course / "gradebook.db").exists() or _students(fixture_course) == {}


def test_unicode_ids_are_refused_with_the_reason(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    with pytest.raises(ValueError, match="line 5: bad id 'zoë'.*folder name"):
        read_roster(roster)


def test_dry_run_writes_nothing(fixture_course, tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_bytes(b"\xef\xbb\xbfid,first_name,last_name,email\nalice,Alice,Liddell,\n")  # BOM, no email
    assert main([str(roster), "--root", str(fixture_course), "--dry-run"]) == 0
    assert "(dry run) roster: 1 added" in capsys.readouterr().out
    assert _students(fixture_course) == {}
