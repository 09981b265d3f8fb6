"""The one place where the course's nbgrader settings live.

`nbgrader_config.py` at the course root applies them to stock nbgrader commands; temporary
courses made by the tests and by the self-check apply the same function, so a notebook is
graded the same way everywhere.
"""
from __future__ import annotations

import os

COURSE_ID = "training-at-scale"

#: Seconds a single cell may run before nbgrader interrupts it and records a
#: CellTimeoutError. Every solved notebook runs in well under this on 2 cores.
CELL_TIMEOUT_S = 60

#: Files never copied from source/ into release/ (nor from submissions).
IGNORE = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.orig", "*.rej"]


def apply_course_config(c, root: str, cell_timeout: int = CELL_TIMEOUT_S) -> None:
    """Fill a traitlets Config `c` with the course's nbgrader settings for course `root`."""
    root = os.path.abspath(root)
    c.CourseDirectory.root = root
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.db_url = "sqlite:///" + os.path.join(root, "gradebook.db")
    c.CourseDirectory.ignore = list(IGNORE)
    # `Execute.timeout` is the knob nbgrader reads (it overrides ExecutePreprocessor.timeout).
    c.Execute.timeout = cell_timeout
    c.Execute.interrupt_on_timeout = True
    c.Execute.execute_retries = 0
    # No shared history file between kernels; no transport notice in every grading log.
    c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
    # A student who deletes a test cell gets it back (with its hidden tests) at grading time.
    c.OverwriteCells.add_missing_cells = True
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
    c.ClearSolutions.enforce_metadata = True
