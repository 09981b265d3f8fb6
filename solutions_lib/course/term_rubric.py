"""The rubric beside each written answer in the Formgrader.

The rubric and model answer of a written answer live in source/ (the solution region of the
markdown cell). The Formgrader shows the student's autograded notebook, so by default the
grader has to open source/ in another tab for each of the class's written answers. There
are two parts here:

1. `AttachRubric`, an autograde preprocessor. It copies each written answer's solution
   region from `source/<assignment>/<notebook>.ipynb` into the autograded notebook's cell
   metadata (`tas.rubric`), after removing any `tas` rubric a submission brought with it: a
   student cannot plant one. The metadata is not shown in the feedback HTML, because
   nbgrader's `feedback` template renders no metadata, and it changes no grade.
2. A Formgrader template, `term_templates/formgrade/index.html.j2`. It shadows nbgrader's
   `formgrade` template, extends it, and draws the rubric box under each written answer.
   `formgrader_template_config(c)` points `HTMLExporter` at it. The course's nbgrader_config.py
   is loaded after the Formgrader's own settings, so these settings win there. The feedback
   keeps nbgrader's `feedback` template, which is found in the same search path.

To turn it on, add to config.py's apply_course_config, after the autograde preprocessors
are set:

    from .term_rubric import enable_rubrics
    enable_rubrics(c, root)

Answers autograded before it was enabled get the rubric when they are autograded again.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

TEMPLATES = Path(__file__).resolve().parent / "term_templates"
_SOLUTION = re.compile(r"^[ \t]*###\s*BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*###\s*END SOLUTION[ \t]*$", re.S | re.M)


def rubrics_of(source_notebook: Path) -> dict[str, str]:
    """{grade_id: solution region} of the written answers (graded markdown cells) of a source notebook."""
    from . import notebooks as nbs

    out = {}
    nb = nbs.read(source_notebook)
    for cell in nb.cells:
        md = nbs.nbgrader_md(cell)
        if cell.get("cell_type") != "markdown" or not (md.get("grade") and md.get("grade_id")):
            continue
        m = _SOLUTION.search(cell.source)
        text = (m.group(1) if m else cell.source).strip()
        if text:
            out[md["grade_id"]] = text
    return out


class AttachRubric(NbGraderPreprocessor):
    """Autograde: the source's rubric of each written answer into the cell's `tas.rubric`."""

    source_root = Unicode("", help="The course's source/ folder").tag(config=True)

    def preprocess(self, nb, resources):
        for cell in nb.cells:  # whatever a submission brought under our key goes first
            tas = (cell.get("metadata") or {}).get("tas")
            if isinstance(tas, dict):
                tas.pop("rubric", None)
            elif tas is not None:
                del cell.metadata["tas"]
        info = resources.get("nbgrader", {})
        path = Path(self.source_root) / str(info.get("assignment", "")) / f"{info.get('notebook', '')}.ipynb"
        if not self.source_root or not path.is_file():
            return nb, resources
        try:
            rubrics = rubrics_of(path)
        except Exception as e:  # noqa: BLE001  (no rubric is better than no grade)
            self.log.warning("no rubrics from %s: %s", path, e)
            return nb, resources
        for cell in nb.cells:
            md = (cell.get("metadata") or {}).get("nbgrader") or {}
            gid = md.get("grade_id")
            if cell.get("cell_type") == "markdown" and md.get("grade") and gid in rubrics:
                cell.metadata.setdefault("tas", {})["rubric"] = rubrics[gid]
        return nb, resources


def nbgrader_templates() -> Path:
    import nbgrader.server_extensions.formgrader as fg

    return Path(fg.__file__).resolve().parent / "templates"


def formgrader_template_config(c) -> None:
    """HTMLExporter settings: the course's `formgrade` template first, nbgrader's templates
    next (the Formgrader's other pages and the `feedback` template), and nbgrader's
    formgrader folder as a raw path so the course template can extend the original."""
    c.HTMLExporter.extra_template_basedirs = [str(TEMPLATES), str(nbgrader_templates())]
    c.HTMLExporter.extra_template_paths = [str(nbgrader_templates().parent)]


def enable_rubrics(c, root) -> None:
    """AttachRubric in the autograde preprocessors (before the final CheckCellMetadata) and
    the Formgrader template, for course `root`."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import CheckCellMetadata

    pre = list(c.Autograde.autograde_preprocessors if "autograde_preprocessors" in c.Autograde else
               Autograde.class_traits()["autograde_preprocessors"].default())
    if AttachRubric not in pre:
        at = len(pre) - 1 if pre and pre[-1] is CheckCellMetadata else len(pre)
        pre.insert(at, AttachRubric)
    c.Autograde.autograde_preprocessors = pre
    c.AttachRubric.source_root = os.path.join(os.path.abspath(root), "source")
    formgrader_template_config(c)
