"""Messages of the lab that a student acts on (issue 28): a test cell run before its answer
cell, a deadlocked or hung distributed run, a pipeline schedule whose orders deadlock.

- NameError: `solutions_lib.kernel_hints` (installed by `import solutions_lib` in a kernel) adds
  "run the answer cell above this test ..." to a NameError of the running cell's own code and
  changes nothing else: graded through stock `nbgrader autograde`, the cell still scores zero.
- Deadlocks: `launch` reports a run in which ranks time out waiting for each other as a deadlock,
  with what every rank waited for, the same text in every repeat (it used to name whichever
  rank's error came first, in most runs a "Connection closed by peer" of a rank whose peer had
  given up); a hang names the rank that never joined; the wait tracking keeps no tensor alive.
- `pipeline_timeline` names p, m, the stuck stage and what it waits for.
"""
from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

import nbformat
import pytest
import torch
import torch.distributed as dist

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, read_results, solved_version
from solutions_lib.dist import LaunchError, launch
from solutions_lib.dist.pipeline import pipeline_timeline

from conftest import FIXTURE


# ---------------------------------------------------------------- NameError in a kernel


def _shell():
    from IPython.core.interactiveshell import InteractiveShell

    from solutions_lib.kernel_hints import install

    shell = InteractiveShell.instance()
    shell.set_custom_exc((), None)
    assert install(shell)
    return shell


def _error_of(shell, code):
    import io
    from contextlib import redirect_stdout

    with redirect_stdout(io.StringIO()):
        res = shell.run_cell(code)
    assert not res.success
    return res.error_in_exec


def test_a_name_missing_in_the_cell_says_run_the_answer_cell():
    shell = _shell()
    err = _error_of(shell, "def _check():\n    return not_defined_answer(3)\n_check()")
    assert isinstance(err, NameError)
    assert str(err).startswith("name 'not_defined_answer' is not defined: run the answer cell above")
    err = _error_of(shell, "x = still_missing + 1")
    assert "run the answer cell above" in str(err)


def test_a_misspelt_name_inside_another_cells_function_keeps_pythons_message():
    shell = _shell()
    shell.run_cell("def answer(x):\n    return misspelt_helper(x)")
    err = _error_of(shell, "answer(2)")
    assert isinstance(err, NameError) and str(err) == "name 'misspelt_helper' is not defined"


def test_another_handler_stays():
    from IPython.core.interactiveshell import InteractiveShell

    from solutions_lib.kernel_hints import install

    shell = InteractiveShell.instance()
    shell.set_custom_exc((KeyError,), lambda *a, **k: None)
    try:
        assert not install(shell)
        assert shell.custom_exceptions == (KeyError,)
    finally:
        shell.set_custom_exc((), None)


def test_stock_autograde_a_test_before_its_answer_says_what_to_do_and_scores_zero(fixture_course):
    """The answer cell defines nothing (as when a student runs a test cell first): the test cell
    fails with the hint, the grade is what it was without it (0 of 2; the other answer's 3)."""
    root = fixture_course
    course = Course(root)
    course.generate(FIXTURE)
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    sub = {n: solved_version(rel[n], nbs.read(root / "source" / FIXTURE / n)) for n in rel}
    cell = next(c for c in sub["exercises.ipynb"].cells if nbs.nbgrader_md(c).get("grade_id") == "square")
    cell.source = "# not written yet"
    course.submit("early", FIXTURE, sub)
    proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", FIXTURE, "--force"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    nb = read_results(root, FIXTURE, "early")
    scores = {n.name: n.score("tests") for n in nb.notebooks}
    assert scores == {"exercises.ipynb": 3.0, "theory.ipynb": 1.0}
    graded = nbformat.read(root / "autograded" / "early" / FIXTURE / "exercises.ipynb", as_version=4)
    test = next(c for c in graded.cells if nbs.nbgrader_md(c).get("grade_id") == "square_tests")
    errors = [o for o in test.outputs if o.get("output_type") == "error"]
    assert errors and errors[0]["ename"] == "NameError"
    assert "name 'square' is not defined: run the answer cell above" in errors[0]["evalue"]


# ---------------------------------------------------------------- deadlocks and hangs


def _ring_of_receives(rank, world_size):
    t = torch.empty(3)
    dist.recv(t, (rank - 1) % world_size)     # every rank waits for the one before it: a cycle


class _Stage:
    def __init__(self):
        self.stage, self.n_stages = dist.get_rank(), dist.get_world_size()

    def forward_step(self, i):
        buf = torch.empty(2, 4, dtype=torch.float64)
        dist.recv(buf, (self.stage - 1) % self.n_stages)


def _stages_wait_for_each_other(rank, world_size):
    _Stage().forward_step(5)


def _one_skips(rank, world_size):
    if rank == 1:
        import time
        time.sleep(30)
    dist.all_reduce(torch.ones(2))


def _one_never_sends(rank, world_size):
    if rank == 0:
        dist.recv(torch.empty(4), 1)
    return rank


def _messages(fn, world, repeats):
    out = []
    for _ in range(repeats):
        with pytest.raises(LaunchError) as e:
            launch(fn, world, collective_timeout=1.0, timeout=60)
        out.append(str(e.value))
    return out


def test_a_deadlock_is_reported_as_one_with_every_ranks_wait_the_same_in_every_run():
    msgs = _messages(_ring_of_receives, 4, 5)
    assert len(set(msgs)) == 1, msgs
    text = msgs[0]
    assert text.startswith("rank 0 failed: deadlock: every rank waited for another") and "timed out" in text
    for r in range(4):
        assert f"rank {r}: waiting in dist.recv from rank {(r - 1) % 4}, a (3,) float32 tensor" in text
    assert "Connection closed" not in text


def test_a_deadlocked_pipeline_stage_is_named_with_what_it_waited_for():
    msgs = _messages(_stages_wait_for_each_other, 2, 5)
    assert len(set(msgs)) == 1, msgs
    for r in range(2):
        assert (f"rank {r}: waiting in dist.recv from rank {1 - r}, a (2, 4) float64 tensor, in "
                f"_Stage.forward_step(i=5) [stage {r} of 2]") in msgs[0]


def test_a_hang_names_the_rank_that_never_joined():
    text = _messages(_one_skips, 2, 1)[0]
    assert text.startswith("rank 0 failed: timed out after the 1 s collective timeout waiting for ranks [1]")
    assert "rank 0: waiting in dist.all_reduce over every rank" in text
    assert "rank 1: running code that is not a message or collective" in text


def test_a_receive_whose_sender_finished_says_so():
    text = _messages(_one_never_sends, 2, 1)[0]
    assert text.startswith("rank 0 failed: it waited for ranks [1], which had finished")
    assert "rank 0: waiting in dist.recv from rank 1" in text and "rank 1: had finished" in text


def test_the_wait_tracking_keeps_no_tensor_alive():
    """Describing a call reads the caller's arguments from its frame; before Python 3.13 that
    leaves a snapshot of every local in the frame, which would keep tensors the code has dropped
    alive (10's FSDP memory test saw them)."""
    from solutions_lib.dist import waits

    slots = bytearray(waits.SLOT_BYTES)
    saved = dict(waits._state)
    waits._state.update(slots=slots, rank=0)
    tracked = waits._wrap("recv", lambda tensor, src: None)

    def step(i):
        big = torch.ones(1000)
        tracked(torch.empty(2), 0)
        ref = weakref.ref(big)
        del big
        return ref() is None

    try:
        assert step(7)
        assert waits.read(slots, 0).startswith("done dist.recv from rank 0, a (2,) float32 tensor, in "
                                               "test_the_wait_tracking_keeps_no_tensor_alive.<locals>.step(i=7)")
    finally:
        waits._state.clear()
        waits._state.update(saved)


# ---------------------------------------------------------------- schedules


def test_a_schedule_deadlock_names_p_m_the_stage_and_what_it_waits_for():
    def no_min_warmup(s, p, m):          # 1F1B whose warm-up is p - s - 1, without min(., m)
        w = p - s - 1
        order = [("F", i) for i in range(w)]
        for j in range(m - w):
            order += [("F", w + j), ("B", j)]
        return order + [("B", i) for i in range(m - w, m)]

    with pytest.raises(ValueError) as e:
        pipeline_timeline([no_min_warmup(s, 4, 2) for s in range(4)])
    text = str(e.value)
    assert "p = 4 stages, m = 2 micro-batches" in text and "stage 0 runs 3 forwards" in text
    assert "stage 0 is stuck at action 3 of its order, B(0, -1), which needs B(1, -1)" in text
    assert "min(p - s - 1, m)" in text
