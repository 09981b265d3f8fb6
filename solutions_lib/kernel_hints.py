"""What a notebook's kernel says when a cell runs before the cells it needs (issue 28).

A test cell run before its answer cell fails with ``NameError: name 'pipeline_schedule' is not
defined``, which does not tell a student what to do. `install()` registers an IPython handler for
NameError that adds what to do to the error's message:

    NameError: name 'pipeline_schedule' is not defined: run the answer cell above this test (a name
    it defines is missing, or that cell failed), then this cell again

It changes the message and nothing else: the cell still fails with a NameError (an ``error``
output, the execute reply's status "error"), so a test cell scores exactly as before, in the
grader, in `nbgrader validate` and in JupyterLab. Only a name missing in the cell's own code
(the cell, or a function the same cell defines) gets the hint; a NameError inside a function
from another cell (a misspelt name in an answer) keeps Python's own message.

Under `nbgrader validate` (the kernel's NBGRADER_EXECUTION is "validate") the same install sends
what Python code writes to stderr (a warning, argparse's usage) to stdout: stock Validate fails a
test cell with any stderr output, while the grader ignores it ("a harmless warning costs
nothing", docs/GRADING.md), so Validate would report a failure that autograde does not give.
Errors still reach Validate as errors.

`import solutions_lib` installs both when it runs inside an IPython kernel (every notebook of the
course imports the kit in its first cell, and test cells import `solutions_lib.grading`), so
every kernel where the course's cells run has it: the student's JupyterLab and Validate, the
grader's sandboxed kernel and the trusted run. It keeps a handler someone else registered.
"""
from __future__ import annotations

import os
import re
import sys

HINT = ("run the answer cell above this test (a name it defines is missing, or that cell failed), "
        "then this cell again")
_NAME = re.compile(r"name '([^']+)' is not defined")


def _hinted(value: BaseException, tb, user_ns) -> bool:
    """Add HINT to `value`'s message when the missing name is a global of the running cell."""
    text = str(value)
    if HINT in text:
        return False
    name = getattr(value, "name", None) or (_NAME.search(text).group(1) if _NAME.search(text) else None)
    if not name or name in user_ns:
        return False
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    cell = [f for f in frames if f.f_globals is user_ns and f.f_code.co_name == "<module>"]
    if not cell or not frames or frames[-1].f_globals is not user_ns:
        return False
    if frames[-1].f_code.co_filename != cell[0].f_code.co_filename:
        return False   # inside a function of another cell: the student's own misspelling
    value.args = (f"name '{name}' is not defined: {HINT}",) + tuple(value.args[1:])
    return True


def _handler(shell, etype, value, tb, tb_offset=None):
    try:
        _hinted(value, tb, shell.user_ns)
    except Exception:  # noqa: BLE001 - a hint must never hide the error itself
        pass
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    return None


def install(shell=None) -> bool:
    """Register the NameError handler in IPython shell `shell` (default: the running one).
    True when it is in place (now or already); False outside IPython or when another handler
    is registered (that one stays)."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        get = getattr(ipython, "get_ipython", None) if ipython is not None else None
        shell = get() if get is not None else None
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    current = tuple(getattr(shell, "custom_exceptions", ()) or ())
    if current == (NameError,) and getattr(shell, "_tas_name_hint", False):
        return True
    _stderr_to_stdout_when_validating()
    if current:
        return False
    shell.set_custom_exc((NameError,), _handler)
    shell._tas_name_hint = True
    return True


def _stderr_to_stdout_when_validating() -> None:
    if os.environ.get("NBGRADER_EXECUTION") == "validate" and sys.stderr is not sys.stdout \
            and type(sys.stderr).__name__ == "OutStream":   # ipykernel's stream, not a terminal
        sys.stderr = sys.stdout
