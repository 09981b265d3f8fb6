"""Feedback that says a written answer awaits a person, instead of "Score: 0.0 / 2.0".

nbgrader's feedback template prints every graded cell's score as `score | float`, so an
answer that nobody has graded yet (Grade.needs_manual_grade: a written answer, or a code
answer whose test could not decide) reads 0.0, and the notebook's score line counts it as 0.
`MarkAwaitingGrader` is an nbconvert preprocessor for `GenerateFeedback.preprocessors`, placed
after nbgrader's GetGrades. It puts a note under every such cell, and one summary note at the
top of the notebook, both read from the gradebook. The stock template still prints its 0.0,
but the notes beside it say what the number means. The cells, grades and gradebook are not
changed.

To use it, put it in config.py's list, before CSSHTMLHeaderPreprocessor:

    c.GenerateFeedback.preprocessors = [GetGrades, NeutraliseStudentContent, HideHiddenTests,
                                        MarkAwaitingGrader, CSSHTMLHeaderPreprocessor]
"""
from __future__ import annotations

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

NOTE_KEY = "awaiting_grader"


class MarkAwaitingGrader(NbGraderPreprocessor):
    """A note under each graded cell still waiting for a person, and a summary on top."""

    cell_note = Unicode(
        "**Awaiting a grader.** This answer ({points:g} point(s)) has not been graded yet: the "
        "score shown for it is a placeholder, not a grade. A person will grade it.",
        help="Note under a cell awaiting a grader; {points}: its points").tag(config=True)
    summary_note = Unicode(
        "**{n} answer(s) ({points:g} point(s)) await a grader.** The score above counts them as 0 "
        "until a person grades them; your final score will include them.",
        help="Note at the top of a notebook with answers awaiting a grader").tag(config=True)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook, MissingEntry

        info = resources.get("nbgrader", {})
        pending: list[tuple[int, float]] = []
        with Gradebook(info["db_url"]) as gb:
            for i, cell in enumerate(nb.cells):
                md = (cell.get("metadata") or {}).get("nbgrader") or {}
                if not (md.get("grade") and md.get("grade_id")):
                    continue
                try:
                    grade = gb.find_grade(md["grade_id"], info["notebook"], info["assignment"], info["student"])
                except MissingEntry:
                    continue
                if grade.needs_manual_grade:
                    pending.append((i, float(grade.max_score or 0.0)))
        for i, pts in reversed(pending):
            nb.cells.insert(i + 1, _note(self.cell_note.format(points=pts)))
        if pending:
            nb.cells.insert(0, _note(self.summary_note.format(n=len(pending), points=sum(p for _, p in pending))))
        return nb, resources


def _note(text: str):
    cell = nbformat.v4.new_markdown_cell(text)
    cell.metadata["tas"] = {NOTE_KEY: True}
    return cell
