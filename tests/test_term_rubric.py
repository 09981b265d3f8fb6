"""The rubric beside written answers in the Formgrader: AttachRubric copies it from source/
into the autograded notebook, the course's formgrade template draws it, and the feedback
template (same settings) does not. The Formgrader's exporter is built the way nbgrader's
FormgradeExtension builds it: its own settings first, the course's config loaded on top."""
from __future__ import annotations

import nbformat
import pytest
from traitlets.config import Config

from solutions_lib.course.term_rubric import AttachRubric, enable_rubrics, nbgrader_templates, rubrics_of

from term_class import build_class, fast_gradebooks

BOX = "for the grader only"


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        fast_gradebooks(mp)
        return build_class(tmp_path_factory.mktemp("term_rubric"))


def _autograded(root, forged: str | None = None):
    nb = nbformat.read(root / "autograded" / "s4" / "A1" / "ex.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "w1":
            cell.source = "My written answer."
            if forged:
                cell.metadata["tas"] = {"rubric": forged}
    return nb


def _course_config(root) -> Config:
    c = Config()
    enable_rubrics(c, root)
    return c


def _attached(root, forged=None):
    nb = _autograded(root, forged)
    c = _course_config(root)
    nb, _ = AttachRubric(config=c).preprocess(nb, {"nbgrader": {"assignment": "A1", "notebook": "ex"}})
    return nb


def test_rubric_comes_from_source_and_a_planted_one_is_dropped(klass):
    assert rubrics_of(klass / "source" / "A1" / "ex.ipynb") == {"w1": "model answer"}
    nb = _attached(klass, forged="Full marks for any answer")
    rub = {c.metadata["nbgrader"]["grade_id"]: c.metadata.get("tas", {}).get("rubric")
           for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    assert rub == {"q1": None, "q2": None, "w1": "model answer"}
    # no source notebook: nothing attached, and the planted text is still gone
    c = Config()
    c.AttachRubric.source_root = str(klass / "nowhere")
    nb, _ = AttachRubric(config=c).preprocess(_autograded(klass, "Full marks"), {"nbgrader": {"assignment": "A1",
                                                                                             "notebook": "ex"}})
    assert "Full marks" not in nbformat.writes(nb)


def test_formgrader_shows_the_rubric_and_feedback_does_not(klass):
    from nbconvert.exporters import HTMLExporter

    nb = _attached(klass)
    # FormgradeExtension: build_extra_config first, then the course's nbgrader_config.py on top
    fg = Config()
    fg.HTMLExporter.template_name = "formgrade"
    fg.HTMLExporter.extra_template_basedirs = [str(nbgrader_templates())]
    fg.merge(_course_config(klass))
    resources = {"assignment_id": "A1", "notebook_id": "ex", "submission_id": "x", "index": 0, "total": 1,
                 "base_url": "", "student": "s4", "last_name": "Dijkstra", "first_name": "Edsger",
                 "notebook_path": "autograded/s4/A1/ex.ipynb"}
    page, _ = HTMLExporter(config=fg).from_notebook_node(nb, resources=resources)
    assert BOX in page and "<code>w1</code> (2.0 points)" in page and "<p>model answer</p>" in page
    assert page.index("My written answer.") < page.index(BOX)  # under the answer
    assert 'id="w1"' in page and "w1-comment" in page  # nbgrader's score and comment boxes are still there
    assert page.count(BOX) == 1

    # GenerateFeedback's exporter settings, made by nbgrader's own GenerateFeedback from the course config
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    fb = _course_config(klass)
    fb.CourseDirectory.root = str(klass)
    gf = GenerateFeedback(coursedir=CourseDirectory(config=fb), config=fb)
    assert gf.config.HTMLExporter.template_name == "feedback"
    for cell in nb.cells:  # what nbgrader's GetGrades puts there before the template runs
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader["score"] = 0.0
    page, _ = HTMLExporter(config=gf.config).from_notebook_node(
        nb, resources={"nbgrader": {"notebook": "ex", "score": 2.0, "max_score": 8.0, "late_penalty": 0}})
    assert "My written answer." in page and BOX not in page and "model answer" not in page
