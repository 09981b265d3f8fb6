"""A small graded class built with nbgrader's Gradebook API (no kernel runs), for the term
tools' tests (export, class report). Every number below is what the tests compute by hand.

Assignment A1 (due 2026-01-10 17:00 UTC), notebook ex.ipynb:
    q1 tests 2 pts [S-1], q2 tests 4 pts [S-1, S-2], w1 written 2 pts [S-2]
Assignment A2 (due 2026-03-01 17:00 UTC), notebook nb.ipynb: q3 tests 1 pt [S-3]

    student  A1: q1  q2  w1         A2: q3
    s1           2   4   2 (hand)       1
    s2           2   2   1 (hand), late penalty 0.5 (A1)
    s3           0   0   0 (hand)
    s4           2   0   awaiting a grader
    s5           A1 failed to run (submitted, no autograded copy)
    s6           A1 not handed in
s2..s6 hand in nothing for A2.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from solutions_lib.course import notebooks as nbs

DUE = {"A1": dt.datetime(2026, 1, 10, 17), "A2": dt.datetime(2026, 3, 1, 17)}
CELLS = {  # assignment -> notebook -> [(grade_id, kind, max, syllabus)]
    "A1": {"ex": [("q1", "code", 2.0, ["S-1"]), ("q2", "code", 4.0, ["S-1", "S-2"]), ("w1", "markdown", 2.0, ["S-2"])]},
    "A2": {"nb": [("q3", "code", 1.0, ["S-3"])]},
}
#: (assignment, student) -> {grade_id: points or None (awaiting a grader)}; "failed" = no autograded copy
GRADES = {
    ("A1", "s1"): {"q1": 2, "q2": 4, "w1": 2},
    ("A1", "s2"): {"q1": 2, "q2": 2, "w1": 1},
    ("A1", "s3"): {"q1": 0, "q2": 0, "w1": 0},
    ("A1", "s4"): {"q1": 2, "q2": 0, "w1": None},
    ("A1", "s5"): "failed",
    ("A2", "s1"): {"q3": 1},
}
PENALTY = {("A1", "s2"): 0.5}  # 5 h late, 10 % of 5 points: what LATE_POLICY gives
LATE_POLICY = ("c = get_config()\n"
               "c.AssignLatePenalties.plugin_class = 'solutions_lib.course.term_late.PercentPerDayLate'\n"
               "c.PercentPerDayLate.percent_per_day = 10.0\n")
NAMES = {"s1": ("Ada", "Lovelace"), "s2": ("Alan", "Turing"), "s3": ("Grace", "Hopper"),
         "s4": ("Edsger", "Dijkstra"), "s5": ("Barbara", "Liskov"), "s6": ("Donald", "Knuth")}


_HEAD: list[str] = []


def fast_gradebooks(monkeypatch) -> None:
    """New SQLite gradebooks without one `alembic heads` subprocess each (seconds on a loaded
    machine): nbgrader stamps every new gradebook with the migration head; ask once per
    process and stamp the same value. The gradebooks made are the same."""
    import nbgrader.api

    if not _HEAD:
        _HEAD.append(nbgrader.api.get_alembic_version())
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", lambda: _HEAD[0])


def _notebook(cells):
    out = [nbs.markdown("# fixture")]
    for gid, kind, pts, syl in cells:
        if kind == "code":
            out.append(nbs.answer(gid + "_answer", f"### BEGIN SOLUTION\n{gid} = 1\n### END SOLUTION"))
            out.append(nbs.tests(gid, f"assert {gid} == 1", pts, syl))
        else:
            out.append(nbs.written(gid, "### BEGIN SOLUTION\nmodel answer\n### END SOLUTION", pts, syl))
    return nbs.normalise(nbs.new_notebook(out))


def build_class(root: Path) -> Path:
    from nbgrader.api import Gradebook

    from solutions_lib.course.grader import ensure_tools_on_path

    ensure_tools_on_path()
    root = Path(root)
    (root / "nbgrader_config.py").write_text(LATE_POLICY)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for a, notebooks in CELLS.items():
            gb.update_or_create_assignment(a, duedate=DUE[a])
            for nb_name, cells in notebooks.items():
                src = root / "source" / a
                src.mkdir(parents=True, exist_ok=True)
                nbs.write(_notebook(cells), src / f"{nb_name}.ipynb")
                gb.update_or_create_notebook(nb_name, a)
                for gid, kind, pts, _ in cells:
                    gb.update_or_create_grade_cell(gid, nb_name, a, max_score=pts, cell_type=kind)
        for sid, (first, last) in NAMES.items():
            gb.update_or_create_student(sid, first_name=first, last_name=last, email=f"{sid}@uni.example",
                                        lms_user_id=str(100 + int(sid[1:])))
        for (a, sid), grades in GRADES.items():
            (nb_name, cells), = CELLS[a].items()
            nb_src = json.loads((root / "source" / a / f"{nb_name}.ipynb").read_text())
            sub_dir = root / "submitted" / sid / a
            sub_dir.mkdir(parents=True)
            (sub_dir / f"{nb_name}.ipynb").write_text(json.dumps(nb_src))
            stamp = DUE[a] - dt.timedelta(hours=1) if (a, sid) not in PENALTY else DUE[a] + dt.timedelta(hours=5)
            (sub_dir / "timestamp.txt").write_text(stamp.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
            gb.update_or_create_submission(a, sid, timestamp=stamp)
            if grades == "failed":
                continue  # nbgrader deletes the autograded copy when the kernel dies
            ag = root / "autograded" / sid / a
            ag.mkdir(parents=True)
            (ag / f"{nb_name}.ipynb").write_text(json.dumps(nb_src))
            for gid, kind, pts, _ in cells:
                g = gb.find_grade(gid, nb_name, a, sid)
                pts_got = grades[gid]
                if kind == "code":
                    g.auto_score, g.needs_manual_grade = float(pts_got), False
                elif pts_got is None:
                    g.auto_score, g.needs_manual_grade = None, True
                else:
                    g.manual_score, g.needs_manual_grade = float(pts_got), False
            if (a, sid) in PENALTY:
                gb.find_submission_notebook(nb_name, a, sid).late_submission_penalty = PENALTY[a, sid]
            gb.db.commit()
    return root
