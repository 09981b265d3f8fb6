"""Grading speed (course/speed.py): the cuts (the settings the course config sets for speed
alone; nbgrader_cmd.py, which our tools run nbgrader through) do not change any grade, and
`bench grading` runs and prints its table. No timing is asserted here;
`python -m solutions_lib bench grading` prints the numbers."""
from __future__ import annotations

import os
import subprocess
import sys

import nbformat
import pytest

from solutions_lib.course import nbgrader_cmd, speed
from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, course_config, read_results, solved_version

from conftest import FIXTURE, write_fixture_course

pytestmark = pytest.mark.nbgrader

#: A kernel that ignores the shutdown request for a while (a non-daemon thread still runs), as
#: kernels that ran torch code often do: stock nbgrader waits for it, the course kills it.
STUBBORN = "\n\nimport threading, time\nthreading.Thread(target=time.sleep, args=(3,)).start()"
CRASH = "\n\nimport os\nos._exit(1)  # the kernel dies here"


def _with_code(nb, code):
    first = next(c for c in nb.cells if nbs.nbgrader_md(c).get("solution") and c.cell_type == "code")
    first.source += code
    return nb


def _autograde_all(root, cut: bool):
    """`nbgrader autograde 00_fixture --force` for the whole class, as a command: before the cuts
    (the `nbgrader` script, nbgrader's stock settings) or after (nbgrader_cmd.py, course settings)."""
    env = {k: v for k, v in os.environ.items() if k != "TAS_GRADING_BASELINE"}
    if cut:
        cmd = nbgrader_cmd.command("autograde", FIXTURE, "--force")
    else:
        cmd = [nbgrader_cmd.stock_executable(), "autograde", FIXTURE, "--force"]
        env["TAS_GRADING_BASELINE"] = "1"
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    out = {}
    for student in ("solved", "crash"):
        res = read_results(root, FIXTURE, student)
        out[student] = [(n.name, n.status, [(c.grade_id, c.points, c.max_points, c.messages) for c in n.cells])
                        for n in res.notebooks]
    return proc.returncode, out


def test_speed_cuts_do_not_change_grades(tmp_path):
    root = write_fixture_course(tmp_path / "course")
    (root / "nbgrader_config.py").write_text(speed.CONFIG_TEMPLATE.format(repo=str(speed.repo_root())))
    course = Course(root, cell_timeout=10)
    course.generate(FIXTURE)
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    src = {n: nbs.read(root / "source" / FIXTURE / n) for n in rel}
    solved = {n: solved_version(rel[n], src[n]) for n in rel}
    # a kernel slow to exit (stock nbgrader waits for it, the course kills it) ...
    course.submit("solved", FIXTURE, {**solved, "theory.ipynb": _with_code(solved["theory.ipynb"], STUBBORN)})
    # ... and one that dies (nbgrader then drops the student's whole autograded folder)
    course.submit("crash", FIXTURE, {**solved, "exercises.ipynb": _with_code(solved_version(
        rel["exercises.ipynb"], src["exercises.ipynb"]), CRASH)})

    # the cut is in the course config, and nbgrader's executors (plain and sandboxed) take it
    from nbgrader.preprocessors import Execute

    from solutions_lib.course.sandbox import get_sandbox_execute
    c = course_config(root)
    assert c.Execute.shutdown_kernel == "immediate"
    assert Execute(config=c).shutdown_kernel == "immediate"
    assert get_sandbox_execute()(config=c).shutdown_kernel == "immediate"
    speed.undo_cuts(c)
    assert Execute(config=c).shutdown_kernel == "graceful"

    rc_stock, stock = _autograde_all(root, cut=False)
    rc_cut, cut = _autograde_all(root, cut=True)
    assert rc_cut == rc_stock != 0  # the crashed student fails the batch either way
    assert cut == stock
    # and the results are the expected ones, not identical nonsense
    by_nb = {s: {name: (status, sum(p or 0 for _, p, _, _ in cells)) for name, status, cells in cut[s]} for s in cut}
    assert by_nb["solved"] == {"exercises.ipynb": ("graded", 5.0), "theory.ipynb": ("graded", 1.0)}
    assert {status for status, _ in by_nb["crash"].values()} == {"failed"}
    graded = nbformat.read(root / "autograded" / "solved" / FIXTURE / "theory.ipynb", as_version=4)
    assert "threading.Thread" in "".join(c.source for c in graded.cells)


def test_nbgrader_cmd_is_nbgrader_without_rfc3987_syntax(tmp_path):
    stock = subprocess.run([nbgrader_cmd.stock_executable(), "--version"], cwd=tmp_path, capture_output=True, text=True)
    fast = subprocess.run(nbgrader_cmd.command("--version"), cwd=tmp_path, capture_output=True, text=True)
    assert (fast.returncode, fast.stdout) == (stock.returncode, stock.stdout) == (0, stock.stdout)
    assert "nbgrader version" in fast.stdout
    probe = ("import atexit, sys; from solutions_lib.course.nbgrader_cmd import main; "
             "atexit.register(lambda: print('jsonschema' in sys.modules, sys.modules.get('rfc3987_syntax'))); "
             "main(['--version'])")
    p = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert p.stdout.strip().endswith("True None"), p.stdout + p.stderr


def test_bench_grading_prints_its_table(tmp_path, monkeypatch):
    source = write_fixture_course(tmp_path / "src")
    # the isolated start-up timings (a few interpreter starts each) add nothing to check here
    monkeypatch.setattr(speed, "_median_wall", lambda cmd, n=3, **kw: 0.0)
    printed: list[str] = []
    speed.grading([FIXTURE], out=printed.append, source_root=source, repeats=1,
                  keep=tmp_path / "bench")
    text = "\n".join(printed)
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.startswith("assignment "))
    assert "plain" in header and "autograde" in header and "ratio" in header, text
    row = next(ln for ln in lines if ln.startswith(FIXTURE + " "))
    assert row.split()[1] == "2" and "6/6" in row, text  # two notebooks, full marks
    assert any(ln.startswith("total ") for ln in lines), text
    assert any(ln.startswith("goal: autograde <= 1.3x plain execution -> ") for ln in lines), text
    # plain execution ran the very code autograde ran (hidden tests included)
    for nb in ("exercises.ipynb", "theory.ipynb"):
        plain = nbformat.read(tmp_path / "bench" / "plain" / speed.STUDENT / FIXTURE / nb, as_version=4)
        graded = nbformat.read(tmp_path / "bench" / "autograded" / speed.STUDENT / FIXTURE / nb, as_version=4)
        assert [c.source for c in plain.cells] == [c.source for c in graded.cells]
        assert "BEGIN HIDDEN TESTS" in "".join(c.source for c in plain.cells)
    for what in ("process start + imports", "kernel start until ready", "gradebook opens:", "CPU time",
                 "nbgrader --version", "through nbgrader_cmd.py", "Gradebook open (existing SQLite)"):
        assert what in text, text


def test_bench_command_line(monkeypatch):
    from solutions_lib.__main__ import main

    calls = []
    monkeypatch.setattr(speed, "grading", lambda assignments, out=print, baseline=False, **kw:
                        calls.append((assignments, baseline)) or True)
    assert main(["bench", "grading", "--assignments", "01_optimizers,03_memory", "--baseline"]) == 0
    assert main(["bench", "grading"]) == 0
    assert calls == [(["01_optimizers", "03_memory"], True), (None, False)]
