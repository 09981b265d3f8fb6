"""Shared fixtures: a tiny fixture course (fast, no torch) and helpers for real assignments."""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solutions_lib.course import notebooks as nbs  # noqa: E402
from solutions_lib.course.grader import ensure_tools_on_path  # noqa: E402

ensure_tools_on_path()
# The lab's CPU tests build CPU tensors: keep them on gloo even where CUDA has enough GPUs for
# NCCL (the NCCL tests pass backend="nccl" themselves).
os.environ.setdefault("TAS_LAB_BACKEND", "gloo")
# Grading refuses to run unsandboxed unless told (issue 26): on a machine where the sandbox
# cannot run, the suite opts out by name, as an instructor would; the sandbox's own tests skip
# there, and tests/test_sandbox_default.py checks the refusal itself. CI has bubblewrap.
from solutions_lib.course.sandbox import sandbox_available  # noqa: E402

if not sandbox_available()[0]:
    os.environ.setdefault("TAS_SANDBOX", "off")
warnings.filterwarnings("ignore", module="nbgrader")
warnings.filterwarnings("ignore", message=".*not in session.*")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session, config, items):
    """Keep `--dist loadgroup` working on pytest >= 9.2: pytest-xdist (3.8) marks a test's
    group by assigning `item._nodeid`, which newer pytest no longer reads (`nodeid` comes from
    `item._id`); copy the mark over so the scheduler sees the groups."""
    result = yield
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # older pytest: `_nodeid` is the node id itself
        return result
    for item in items:
        tagged = item.__dict__.get("_nodeid")
        if isinstance(tagged, str) and tagged != item.nodeid:
            item._id = NodeId.parse(tagged)
    return result

FIXTURE = "00_fixture"


def fixture_notebooks() -> dict[str, nbformat.NotebookNode]:
    """Two small notebooks: autograded answers with hidden tests, and a written answer."""
    ex = nbs.new_notebook([
        nbs.markdown("# Fixture exercises", locked=True),
        nbs.answer("square", "def square(x):\n    ### BEGIN SOLUTION\n    return x * x\n    ### END SOLUTION"),
        nbs.tests("square_tests",
                  "from solutions_lib.grading import expect_close\n"
                  "expect_close(square(3), 9, 'square(3)')\n"
                  "### BEGIN HIDDEN TESTS\n"
                  "expect_close(square(-7.5), 56.25, 'square(-7.5)', hint='hidden test')\n"
                  "### END HIDDEN TESTS", 2, ["TSX-01"]),
        nbs.answer("cube", "def cube(x):\n    ### BEGIN SOLUTION\n    return x ** 3\n    ### END SOLUTION"),
        nbs.tests("cube_tests",
                  "from solutions_lib.grading import expect_close\n"
                  "expect_close(cube(2), 8, 'cube(2)')\n"
                  "### BEGIN HIDDEN TESTS\n"
                  "expect_close(cube(-3), -27, 'cube(-3)')\n"
                  "### END HIDDEN TESTS", 3, ["TSX-02"]),
        nbs.written("why", "### BEGIN SOLUTION\nBecause squares are never negative.\n"
                    "Rubric (1 pt): mentions the sign.\n### END SOLUTION", 1, ["TSX-02"]),
    ])
    th = nbs.new_notebook([
        nbs.markdown("# Fixture theory"),
        nbs.answer("double", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"),
        nbs.tests("double_tests",
                  "from solutions_lib.grading import expect_close\n"
                  "expect_close(double(4), 8, 'double(4)')\n"
                  "### BEGIN HIDDEN TESTS\n"
                  "expect_close(double(0.25), 0.5, 'double(0.25)')\n"
                  "### END HIDDEN TESTS", 1, ["TH-01"]),
    ])
    return {"exercises.ipynb": nbs.normalise(ex), "theory.ipynb": nbs.normalise(th)}


def write_fixture_course(root: Path) -> Path:
    src = root / "source" / FIXTURE
    src.mkdir(parents=True, exist_ok=True)
    for name, nb in fixture_notebooks().items():
        nbs.write(nb, src / name)
    (root / "nbgrader_config.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from solutions_lib.course.config import apply_course_config\n"
        "c = get_config()\n"
        "apply_course_config(c, root=__import__('os').path.dirname(__import__('os').path.abspath(__file__)),"
        " cell_timeout=5)\n")
    return root


@pytest.fixture
def fixture_course(tmp_path, monkeypatch) -> Path:
    """A fresh course holding only the fixture assignment; TAS_COURSE_ROOT points at it."""
    root = write_fixture_course(tmp_path / "course")
    monkeypatch.setenv("TAS_COURSE_ROOT", str(root))
    return root
