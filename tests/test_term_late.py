"""Late penalties through nbgrader's own late-submission plugin: a real autograde of a late
submission stores the course plugin's penalty in the gradebook; extensions and manual grades
are taken into account by `term_late apply`."""
from __future__ import annotations

import math

import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.term_late import (LatePolicyError, PercentPerDayLate, course_plugin, late_table,
                                            load_course_config, main, parse_due)

from conftest import FIXTURE
from term_class import fast_gradebooks

LATE_CONFIG = """
c.AssignLatePenalties.plugin_class = "solutions_lib.course.term_late.PercentPerDayLate"
c.PercentPerDayLate.percent_per_day = 10.0
c.PercentPerDayLate.max_percent = 25.0
c.PercentPerDayLate.grace_minutes = 15.0
"""


@pytest.fixture(autouse=True)
def _fast_new_gradebooks(monkeypatch):
    fast_gradebooks(monkeypatch)


@pytest.mark.parametrize("seconds, days, percent", [
    (0, 0, 0), (15 * 60, 0, 0), (15 * 60 + 1, 1, 10), (86_400, 1, 10), (86_401, 2, 20),
    (36 * 3600, 2, 20), (3 * 86_400 - 1, 3, 25), (30 * 86_400, 30, 25)])
def test_percent_per_day_is_per_started_day_after_grace_and_capped(seconds, days, percent):
    p = PercentPerDayLate(percent_per_day=10.0, max_percent=25.0, grace_minutes=15.0)
    assert p.days_late(seconds) == days
    assert p.percent(seconds) == percent
    assert math.isclose(p.late_submission_penalty("s", 8.0, seconds), 8.0 * percent / 100)


@pytest.mark.parametrize("kw", [{"percent_per_day": -1.0}, {"max_percent": 101.0}, {"grace_minutes": -5.0},
                                {"percent_per_day": float("nan")}])
def test_out_of_range_policy_is_refused(kw):
    with pytest.raises(ValueError, match="PercentPerDayLate"):
        PercentPerDayLate(**kw)
    assert issubclass(LatePolicyError, ValueError)


def test_due_dates_need_a_time_zone():
    assert parse_due("2026-01-10 17:00:00 UTC").isoformat() == "2026-01-10T17:00:00"
    assert parse_due("2026-01-10T18:00:00+01:00").isoformat() == "2026-01-10T17:00:00"
    with pytest.raises(ValueError, match="no time zone"):
        parse_due("2026-01-10 17:00:00")
    with pytest.raises(ValueError, match="cannot read"):
        parse_due("2026-13-45 17:00:00 UTC")


@pytest.mark.nbgrader
def test_late_autograde_records_the_plugin_penalty_and_apply_follows_extensions(fixture_course, capsys):
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    from solutions_lib.course.grader import Course, solved_version

    with open(fixture_course / "nbgrader_config.py", "a") as f:
        f.write(LATE_CONFIG)
    cfg = load_course_config(fixture_course)  # what stock nbgrader reads from the course root
    assert type(course_plugin(fixture_course, cfg)) is PercentPerDayLate
    course = Course(fixture_course, cell_timeout=5)
    course.config.merge(cfg)
    from solutions_lib.course.term_rubric import enable_rubrics
    enable_rubrics(course.config, fixture_course)  # and the rubric beside written answers (term_rubric.py)
    course.api = NbGraderAPI(coursedir=CourseDirectory(config=course.config), config=course.config)
    course.generate(FIXTURE)
    assert main(["--root", str(fixture_course), "due", FIXTURE, "2026-01-10 17:00:00 UTC"]) == 0
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    solved = {n: solved_version(rel[n], nbs.read(fixture_course / "source" / FIXTURE / n)) for n in rel}
    folder = course.submit("late", FIXTURE, solved)
    (folder / "timestamp.txt").write_text("2026-01-12 05:00:00.000000 UTC")  # 36 h late: 2 days, 20 %
    result = course.autograde(FIXTURE, "late")
    assert result["success"], result.get("log")

    url = f"sqlite:///{fixture_course / 'gradebook.db'}"

    def penalties():
        with Gradebook(url) as gb:
            sub = gb.find_submission(FIXTURE, "late")
            return ({nb.name: (nb.score, nb.late_submission_penalty) for nb in sub.notebooks},
                    sub.total_seconds_late, sub.late_submission_penalty)

    by_nb, late_s, total = penalties()
    # exercises: 2 + 3 autograded, the written answer awaits a person (0 so far); theory: 1
    assert late_s == 36 * 3600
    assert by_nb == {"exercises": (5.0, pytest.approx(1.0)), "theory": (1.0, pytest.approx(0.2))}
    assert total == pytest.approx(1.2)

    # stock generate_feedback with the course's preprocessors plus MarkAwaitingGrader: the page
    # shows nbgrader's late penalty line and says the written answer awaits a grader
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

    from solutions_lib.course.term_feedback import MarkAwaitingGrader
    pre = list(course.config.GenerateFeedback.preprocessors)
    course.config.GenerateFeedback.preprocessors = (pre[:pre.index(CSSHTMLHeaderPreprocessor)] + [MarkAwaitingGrader]
                                                    + pre[pre.index(CSSHTMLHeaderPreprocessor):])
    course.api = NbGraderAPI(coursedir=CourseDirectory(config=course.config), config=course.config)
    fb = course.api.generate_feedback(FIXTURE, "late", force=True)
    assert fb["success"], fb.get("log")
    page = (fixture_course / "feedback" / "late" / FIXTURE / "exercises.html").read_text()
    assert "Late submission penalty (Score: -1.0)" in page
    assert "1 answer(s) (1 point(s)) await a grader" in page and "has not been graded yet" in page
    assert "await a grader" not in (fixture_course / "feedback" / "late" / FIXTURE / "theory.html").read_text()
    graded = nbs.read(fixture_course / "autograded" / "late" / FIXTURE / "exercises.ipynb")
    why = next(c for c in graded.cells if nbs.nbgrader_md(c).get("grade_id") == "why")
    assert why.metadata["tas"]["rubric"].endswith("Rubric (1 pt): mentions the sign.")
    assert "for the grader only" not in page

    # the written answer graded by hand: nbgrader's stored penalty is stale until `apply`
    with Gradebook(url) as gb:
        g = gb.find_grade("why", "exercises", FIXTURE, "late")
        g.manual_score = 1.0
        gb.db.commit()
    assert penalties()[0]["exercises"] == (6.0, pytest.approx(1.0))
    assert main(["--root", str(fixture_course), "apply", FIXTURE]) == 0
    assert penalties()[0]["exercises"] == (6.0, pytest.approx(1.2))

    # one more day of extension: 12 h late, one day, 10 %; two days: on time, no penalty
    assert main(["--root", str(fixture_course), "extend", FIXTURE, "late", "--days", "1"]) == 0
    assert penalties()[0] == {"exercises": (6.0, pytest.approx(0.6)), "theory": (1.0, pytest.approx(0.1))}
    assert main(["--root", str(fixture_course), "extend", FIXTURE, "late", "--days", "2"]) == 0
    by_nb, late_s, total = penalties()
    assert late_s == 0 and total == 0 and by_nb == {"exercises": (6.0, None), "theory": (1.0, None)}
    capsys.readouterr()
    assert main(["--root", str(fixture_course), "show", FIXTURE]) == 0
    shown = capsys.readouterr().out
    assert "2026-01-12 17:00:00" in shown and "2026-01-12 05:00:00" in shown  # due with extension; submitted
    assert [r.penalty for r in late_table(fixture_course, FIXTURE)] == [None, None]

    # refusals say why
    assert main(["--root", str(fixture_course), "extend", FIXTURE, "nobody", "--days", "1"]) == 2
    assert main(["--root", str(fixture_course), "due", "99_nope", "2026-01-10 17:00:00 UTC"]) == 2
    err = capsys.readouterr().err
    assert "no student 'nobody'" in err and "no assignment '99_nope'" in err
