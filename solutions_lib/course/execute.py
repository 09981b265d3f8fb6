"""The grader's Execute preprocessor: nbgrader's `Execute` with a cap on the output it keeps.

A kernel can print without end (`print('x' * 2**29)`, a loop over `print`), and stock
nbgrader keeps every byte: the grader's memory grows with it, and the autograded notebook and
the feedback page are written with all of it. `CourseExecute` (used by autograde whether the
sandbox is on or off; sandbox.py subclasses it) keeps at most `output_cap_bytes` of output per
notebook while the cells run (nbclient's `output` and display updates are checked before
anything is stored), plus `cell_reserve_bytes` per cell, so that the test cells that run after
a flood still keep their own small outputs (a failing test's error, the check records of
integrity.py). Error outputs are always kept (shortened), since nbgrader scores a test cell by
its error outputs.

A cell whose output was dropped gets an error output `OutputTooLarge: ...` at its end: a test
cell that floods scores 0 (never more than it deserves: whatever was dropped, a stderr line or
a partial-credit value, can no longer count for it), an answer cell says why its output stops.
"""
from __future__ import annotations

import os

from nbclient.util import run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, Unicode

from .limits import OUTPUT_CAP_BYTES
from .grader_side import GraderSideMixin

CELL_RESERVE_BYTES = 64 * 2**10   # kept for each cell even once the notebook's cap is spent
ERROR_TEXT_BYTES = 16 * 2**10     # an error output's message and traceback are cut to this
OUTPUT_TOO_LARGE = "OutputTooLarge"


def output_size(content: dict) -> int:
    """Approximate bytes an output message's content keeps (text, data, traceback)."""
    n = 0
    for key in ("text", "evalue", "ename"):
        v = content.get(key)
        if isinstance(v, str):
            n += len(v)
    for tb in content.get("traceback") or []:
        n += len(tb) if isinstance(tb, str) else 0
    for field in ("data", "metadata"):
        d = content.get(field)
        if isinstance(d, dict):
            for k, v in d.items():
                n += len(k) + (len(v) if isinstance(v, str) else len(str(v)))
    return n


def _shorten_error(content: dict) -> None:
    """Cut an error's message and traceback (kept whatever the budget) to ERROR_TEXT_BYTES."""
    ev = content.get("evalue")
    if isinstance(ev, str) and len(ev) > ERROR_TEXT_BYTES:
        content["evalue"] = ev[:ERROR_TEXT_BYTES] + " [... cut by the grader]"
    tb = [t for t in content.get("traceback") or [] if isinstance(t, str)]
    if sum(map(len, tb)) > ERROR_TEXT_BYTES:
        kept, n = [], 0
        for line in reversed(tb):  # the last lines say what failed
            if n + len(line) > ERROR_TEXT_BYTES:
                kept.append(line[-max(0, ERROR_TEXT_BYTES - n):])
                break
            kept.append(line)
            n += len(line)
        content["traceback"] = ["[... traceback cut by the grader]"] + kept[::-1]


class SandboxRefused(RuntimeError):
    """Autograde will not run students' code without the sandbox (config.py: refusal)."""


class CourseExecute(GraderSideMixin, Execute):
    """nbgrader's Execute with a per-notebook output cap (see the module docstring), which
    runs the test cells that the trusted run marked grader-side in the grader (grader_side.py).

    Settings under `c.Execute` (timeout, extra_arguments...) apply; the cap is
    `c.CourseExecute.output_cap_bytes` (config.py: OUTPUT_CAP_BYTES)."""

    output_cap_bytes = Integer(OUTPUT_CAP_BYTES, config=True,
                               help="Output bytes kept per notebook; past it a cell keeps only "
                                    "cell_reserve_bytes and gets an OutputTooLarge error.")
    cell_reserve_bytes = Integer(CELL_RESERVE_BYTES, config=True,
                                 help="Output bytes every cell may keep once the notebook's cap is spent.")

    unsandboxed_refusal = Unicode("", config=True,
                                  help="When set (config.py: TAS_SANDBOX on/required where the sandbox cannot "
                                       "run), autograde refuses to start a kernel, with this message.")

    withhold_references = Bool(True, config=True,
                               help="During autograde, kernels import the view of solutions_lib with the "
                                    "reference answers withheld (withheld_view.py).")

    async def async_start_new_kernel(self, **kwargs):
        if self.unsandboxed_refusal and os.environ.get("NBGRADER_EXECUTION") == "autograde":
            raise SandboxRefused(self.unsandboxed_refusal)
        # Without the sandbox the view comes first on the kernel's PYTHONPATH (the sandbox binds
        # it over the package itself): the same tests see the same stand-ins either way.
        if self.withhold_references and os.environ.get("NBGRADER_EXECUTION") == "autograde" and "env" not in kwargs:
            from .withheld_view import build_view

            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([str(build_view().parent)] +
                                                [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
            kwargs["env"] = env
        await super().async_start_new_kernel(**kwargs)

    # nbclient binds the sync names to the base class's coroutines at class creation
    start_new_kernel = run_sync(async_start_new_kernel)
    execute_cell = run_sync(GraderSideMixin.async_execute_cell)

    def preprocess(self, nb, resources=None, km=None):
        self._kept_total = 0
        self._kept_cell: dict[int, int] = {}
        self._over: set[int] = set()
        self._cell_now = None
        self.grader_side_ids, self.grader_side_sources = frozenset(), {}
        nbg = (resources or {}).get("nbgrader", {}) if isinstance(resources, dict) else {}
        if os.environ.get("NBGRADER_EXECUTION") == "autograde" and nbg.get("assignment") and nbg.get("notebook"):
            from .grader_side import enabled
            if enabled():
                from .integrity import source_notebook
                from .trusted import trusted_records
                entry = trusted_records(source_notebook(self.config, resources), timeout=int(self.timeout or 60))
                self.grader_side_ids = frozenset(entry.get("grader_side", []))
                self.grader_side_sources = {g: c.get("source", "") for g, c in entry.get("cells", {}).items()}
        try:
            return super().preprocess(nb, resources, km)
        finally:
            self.close_grader_side()

    # -- accounting --
    def _admit(self, cell_index: int, size: int) -> bool:
        """Take `size` bytes of budget for cell `cell_index`, or say no (and mark the cell)."""
        if not hasattr(self, "_kept_total"):  # used outside preprocess (nbclient API)
            self._kept_total, self._kept_cell, self._over, self._cell_now = 0, {}, set(), None
        cell_kept = self._kept_cell.get(cell_index, 0)
        if self._kept_total + size <= self.output_cap_bytes or cell_kept + size <= self.cell_reserve_bytes:
            self._kept_total += size
            self._kept_cell[cell_index] = cell_kept + size
            return True
        self._over.add(cell_index)
        return False

    def _refund(self, cell_index: int) -> None:
        self._kept_total -= self._kept_cell.pop(cell_index, 0)

    # -- nbclient hooks --
    def process_message(self, msg, cell, cell_index):
        self._cell_now = cell_index
        return super().process_message(msg, cell, cell_index)

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content") or {}
        if msg.get("msg_type") == "error":
            _shorten_error(content)
            size = output_size(content)
            self._admit(cell_index, size) or self._force(cell_index, size)
        elif not self._admit(cell_index, output_size(content)):
            # a stream keeps its head, up to what is left of the budget (the kernel sends many
            # prints as one message: dropping it whole would keep nothing of a flood)
            room = max(self.output_cap_bytes - self._kept_total,
                       self.cell_reserve_bytes - self._kept_cell.get(cell_index, 0))
            if msg.get("msg_type") != "stream" or room <= 0 or not isinstance(content.get("text"), str):
                return None
            content["text"] = content["text"][:room]
            if not self._admit(cell_index, output_size(content)):
                return None
            self._over.add(cell_index)
        if getattr(self, "clear_before_next_output", False) and \
                not self.output_hook_stack[msg["parent_header"].get("msg_id")]:
            # nbclient clears the cell's outputs before storing this one: give their bytes back
            size = output_size(content)
            self._refund(cell_index)
            self._kept_total += size
            self._kept_cell[cell_index] = size
        return super().output(outs, msg, display_id, cell_index)

    def _force(self, cell_index: int, size: int) -> bool:
        self._kept_total += size
        self._kept_cell[cell_index] = self._kept_cell.get(cell_index, 0) + size
        return True

    def clear_output(self, outs, msg, cell_index):
        super().clear_output(outs, msg, cell_index)
        if not outs:
            self._refund(cell_index)

    def _update_display_id(self, display_id, msg):
        # an update replaces the data of earlier outputs; count it as new bytes (no refund)
        cell_index = self._cell_now if self._cell_now is not None else -1
        if not self._admit(cell_index, output_size(msg.get("content") or {})):
            return
        super()._update_display_id(display_id, msg)

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        cell, index = kwargs["cell"], kwargs.get("cell_index")
        if index in getattr(self, "_over", ()):
            cap = self.output_cap_bytes / 2**20
            msg = (f"this cell's output went over what the grader keeps ({cap:g} MB per notebook, "
                   f"then {self.cell_reserve_bytes // 1024} KB per cell); the rest was dropped. "
                   "Print less (a summary, not every step).")
            cell.outputs.append(NotebookNode(output_type="error", ename=OUTPUT_TOO_LARGE, evalue=msg,
                                             traceback=[f"{OUTPUT_TOO_LARGE}: {msg}"]))
