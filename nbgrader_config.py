"""nbgrader configuration of the course, read by every stock nbgrader command run here.

The course root is this file's folder, wherever the repository is cloned, so
`nbgrader generate_assignment 01_optimizers --force`, `nbgrader autograde 01_optimizers --force`,
`nbgrader generate_feedback ...` and `nbgrader export` work from the root without flags.
The settings live in `solutions_lib.course.config` so that temporary courses (tests, the
self-check) grade exactly as the instructor's course does.
"""
import os
import sys

_root = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _root)  # solutions_lib is importable even without `pip install -e .`

from solutions_lib.course.config import apply_course_config  # noqa: E402
from solutions_lib.course.grader import ensure_tools_on_path  # noqa: E402

# nbgrader runs `alembic` from PATH when it creates a gradebook: a bare `.venv/bin/nbgrader`
# then works without an activated venv
ensure_tools_on_path()

c = get_config()  # noqa: F821  (provided by traitlets when nbgrader loads this file)
apply_course_config(c, root=_root)

# Late submissions (docs/term.md): a percentage of the notebook's score per started day after the
# due date (`python -m solutions_lib late due A "2026-12-01 23:59 Europe/Paris"`), capped, after
# a grace period; extensions with `python -m solutions_lib late extend`.
c.AssignLatePenalties.plugin_class = "solutions_lib.course.term_late.PercentPerDayLate"
c.PercentPerDayLate.percent_per_day = 10.0
c.PercentPerDayLate.max_percent = 50.0
c.PercentPerDayLate.grace_minutes = 15.0
