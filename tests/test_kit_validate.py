"""What made solved notebooks fail `nbgrader validate` with the student edition (issue 25,
`python -m solutions_lib bench studentkit`), each checked in a second:

- 10 exercises_3: argparse prints its usage to stderr when `parse_config` rejects an argument,
  and stock Validate scores a test cell with any stderr output as failed: the test cell sends
  that usage to stdout;
- 11 exercises_3: `live_tensor_bytes` read `.grad` of non-leaf tensors, which warns on stderr;
- 10 theory: `no_delegation` took zmq's garbage-collector thread (started by the kernel after a
  plot) for one of the student's, because in the kit's venv the packages lie outside sys.prefix.
"""
from __future__ import annotations

import contextlib
import io
import math
import sys
import threading
import time
import warnings

import pytest

from solutions_lib.course import notebooks as nbs

from conftest import ROOT


def _cell(path, gid):
    return next(c for c in nbs.read(path).cells if nbs.nbgrader_md(c).get("grade_id") == gid)


def test_parse_config_tests_write_nothing_to_stderr():
    nb = ROOT / "source" / "10_distributed_lab" / "exercises_3_training_script.ipynb"
    ns = {"math": math}
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        exec(nbs.strip_solution_markers(_cell(nb, "parse_config").source), ns)
        src = _cell(nb, "parse_config_tests_validation").source
        exec(src.replace("### BEGIN HIDDEN TESTS", "").replace("### END HIDDEN TESTS", ""), ns)
    assert err.getvalue() == ""
    assert "usage: train" in out.getvalue()      # the student still sees argparse's message


def test_live_tensor_bytes_warns_nothing():
    import torch

    from solutions_lib.dist.probes_sharding import live_tensor_bytes

    x = torch.ones(4, requires_grad=True)
    y = x * 2                                   # a non-leaf: reading its .grad warns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert live_tensor_bytes() >= y.numel() * 4


def test_a_thread_of_an_installed_package_outside_sys_prefix_is_not_the_students(monkeypatch, tmp_path):
    zmq_garbage = pytest.importorskip("zmq.utils.garbage")
    from solutions_lib import grading

    gc = zmq_garbage.GarbageCollector()
    gc.start()
    try:
        # the student edition's venv: sys.prefix holds only the kit, torch/zmq/numpy come from elsewhere
        monkeypatch.setattr(sys, "prefix", str(tmp_path / "kit-venv"))
        monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "kit-venv"))
        monkeypatch.setattr(grading, "_INSTALLED_DIRS", grading._installed_dirs())   # as in a kernel: zmq loaded
        assert grading._foreign_thread({}, None) is None
        # a thread running code of the notebook's own (a file outside every installed package) still is
        mod = tmp_path / "helper_mod.py"
        mod.write_text("import time\ndef spin(stop):\n    while not stop.is_set():\n        time.sleep(0.01)\n")
        ns: dict = {}
        exec(compile(mod.read_text(), str(mod), "exec"), ns)
        stop = threading.Event()
        t = threading.Thread(target=ns["spin"], args=(stop,), daemon=True)
        t.start()
        time.sleep(0.05)
        try:
            assert "started by your code (spin in" in (grading._foreign_thread({}, None) or "")
        finally:
            stop.set()
            t.join()
    finally:
        gc.stop()


def _validate(tmp_path, name, test_source):
    import os
    import subprocess

    import nbformat

    nb = nbs.normalise(nbs.new_notebook([
        nbs.answer("sq", "def sq(x):\n    ### BEGIN SOLUTION\n    return x * x\n    ### END SOLUTION"),
        nbs.tests("sq_tests", test_source, 1, ["TSX-01"]),
    ]))
    nb.cells[0].source = nbs.strip_solution_markers(nb.cells[0].source)   # solved, as a student hands it in
    nbformat.write(nb, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAS_", "NBGRADER_", "PYTHONPATH"))}
    p = subprocess.run([sys.executable, "-m", "nbgrader", "validate", name], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    return "Success! Your notebook passes all the tests." in p.stdout + p.stderr


def test_validate_ignores_stderr_of_a_test_cell_as_the_grader_does_and_still_fails_an_error(tmp_path):
    """Under `nbgrader validate` the kit (imported by every notebook) sends Python's stderr to stdout,
    so a warning or argparse's usage in a test cell does not fail Validate (the grader ignores
    stderr too); without the kit, stock Validate fails that cell; an error still fails it."""
    noisy = "import sys, warnings\n{imp}print('usage: x', file=sys.stderr)\nwarnings.warn('harmless')\nassert sq(3) == 9"
    assert _validate(tmp_path, "kit.ipynb", noisy.format(imp="import solutions_lib\n"))
    assert not _validate(tmp_path, "stock.ipynb", noisy.format(imp=""))
    assert not _validate(tmp_path, "wrong.ipynb", "import solutions_lib\nassert sq(3) == 10")
