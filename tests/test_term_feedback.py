"""Feedback notes for answers awaiting a grader, read from a small graded class's gradebook
(tests/term_class.py). The stock generate_feedback run with the note is in test_term_late.py."""
from __future__ import annotations

import nbformat
import pytest

from solutions_lib.course.term_feedback import NOTE_KEY, MarkAwaitingGrader

from term_class import build_class, fast_gradebooks


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        fast_gradebooks(mp)
        return build_class(tmp_path_factory.mktemp("term_feedback"))


def _run(root, student):
    nb = nbformat.read(root / "autograded" / student / "A1" / "ex.ipynb", as_version=4)
    resources = {"nbgrader": {"db_url": f"sqlite:///{root / 'gradebook.db'}", "notebook": "ex",
                              "assignment": "A1", "student": student}}
    nb, _ = MarkAwaitingGrader().preprocess(nb, resources)
    return nb


def _ids(nb):
    return [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") or
            ("NOTE" if c.get("metadata", {}).get("tas", {}).get(NOTE_KEY) else None) for c in nb.cells]


def test_a_pending_written_answer_gets_a_note_beside_it_and_on_top(klass):
    nb = _run(klass, "s4")  # s4's written answer w1 (2 points) awaits a grader
    ids = _ids(nb)
    assert ids[0] == "NOTE" and ids[ids.index("w1") + 1] == "NOTE" and ids.count("NOTE") == 2
    assert "1 answer(s) (2 point(s)) await a grader" in nb.cells[0].source
    assert "(2 point(s)) has not been graded yet" in nb.cells[ids.index("w1") + 1].source
    nbformat.validate(nb)


def test_graded_answers_get_no_note(klass):
    for student in ("s1", "s3"):  # every answer graded (s3's are all 0: a real 0 is not "awaiting")
        assert "NOTE" not in _ids(_run(klass, student)), student
