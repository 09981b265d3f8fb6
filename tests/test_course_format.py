"""Source notebooks are reviewable (normalised JSON), well formed for nbgrader, and together
grade every syllabus id that is not explicitly listed as not yet written."""
from __future__ import annotations

import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.coverage import coverage_map, problems
from solutions_lib.course.paths import assignments, source_notebooks
from solutions_lib.course.syllabus import SYLLABUS

from conftest import ROOT

NOTEBOOKS = source_notebooks(ROOT)
IDS = [f"{p.parent.name}/{p.name}" for p in NOTEBOOKS]


def test_syllabus_has_87_seed_ids_and_16_ext_ids():
    from solutions_lib.course.syllabus import EXT_IDS, SEED_IDS

    assert len(SEED_IDS) == 87 and len(EXT_IDS) == 16 and len(SYLLABUS) == 103


def test_every_syllabus_id_is_graded_or_listed_as_not_yet_written():
    assert problems(coverage_map(ROOT)) == []


def test_each_assignment_has_theory_and_exercises():
    """A theory notebook and at least one exercises notebook (the lab has several, in order)."""
    for a in assignments(ROOT):
        names = {p.name for p in (ROOT / "source" / a).glob("*.ipynb")}
        assert "theory.ipynb" in names, f"{a} has {sorted(names)}: no theory.ipynb"
        assert any(n == "exercises.ipynb" or n.startswith("exercises_") for n in names), \
            f"{a} has {sorted(names)}: no exercises.ipynb or exercises_<part>.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_source_is_normalised(path):
    assert nbs.is_normalised(path), f"{path} has outputs or unstable JSON: run `make fmt`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_graded_cells_are_well_formed(path):
    nb = nbs.read(path)
    gids = [nbs.nbgrader_md(c).get("grade_id") for c in nb.cells if nbs.nbgrader_md(c)]
    assert len(gids) == len(set(gids)), f"{path}: duplicate grade ids"
    graded = nbs.graded_cells(nb)
    assert graded, f"{path} has no graded cell"
    for cell in graded:
        md = nbs.nbgrader_md(cell)
        gid = md["grade_id"]
        assert md.get("points", 0) > 0, f"{path}:{gid} has no points"
        assert cell.metadata.get("syllabus"), f"{path}:{gid} names no syllabus id"
        if cell.cell_type == "code":
            assert "### BEGIN HIDDEN TESTS" in cell.source, f"{path}:{gid} has no hidden tests"
            assert "assert " not in cell.source.replace("assert_", ""), \
                f"{path}:{gid}: use solutions_lib.grading checks, whose messages a student can act on"
        else:
            assert "Rubric" in cell.source, f"{path}:{gid}: a written answer needs a rubric in its solution"
    answers = [c for c in nb.cells if nbs.nbgrader_md(c).get("solution")]
    for cell in answers:
        assert "### BEGIN SOLUTION" in cell.source, f"{path}:{nbs.nbgrader_md(cell)['grade_id']}"
