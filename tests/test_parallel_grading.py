"""Parallel autograde (`python -m solutions_lib autograde A --workers N`): the same class graded
serially and 3 students at a time, in two copies of one course, gives the same gradebook, cell
by cell; a student whose kernel dies or whose notebook is unreadable fails alone; no
"database is locked"; the CLI's exit codes and errors.

The fixture course (conftest.py) keeps this fast: a real nbgrader course configured by
`apply_course_config` (sandbox as in the environment), with notebooks that run in a second.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURE, ROOT, write_fixture_course
from solutions_lib.course import notebooks as nbs
from solutions_lib.course import parallel
from solutions_lib.course.grader import Course, read_results, solved_version
from solutions_lib.course.parallel import autograde_class

pytestmark = [pytest.mark.nbgrader, pytest.mark.xdist_group("parallel_grading")]

FRACTIONS = {"s1_solved": 1.0, "s2_blank": 0.0, "s3_half": 0.5}
CRASH, GARBLED = "s5_crash", "s6_garbled"
CLASS = [*FRACTIONS, CRASH, GARBLED]
BAD = {CRASH, GARBLED}


def build_class(root: Path) -> None:
    """The fixture course (cell timeout raised to 30 s: three kernels share two cores here),
    generated, with a class in submitted/."""
    write_fixture_course(root)
    cfg = root / "nbgrader_config.py"
    cfg.write_text(cfg.read_text().replace("cell_timeout=5", "cell_timeout=30"))
    course = Course(root, cell_timeout=30)
    course.generate(FIXTURE)
    names = sorted(p.name for p in (root / "source" / FIXTURE).glob("*.ipynb"))
    rel = {n: course.release_notebook(FIXTURE, n) for n in names}
    src = {n: nbs.read(root / "source" / FIXTURE / n) for n in names}
    for student, fraction in FRACTIONS.items():
        course.submit(student, FIXTURE, {n: solved_version(rel[n], src[n], fraction) for n in names})
    crash = {n: solved_version(rel[n], src[n]) for n in names}
    first = next(c for c in crash["exercises.ipynb"].cells
                 if nbs.nbgrader_md(c).get("solution") and c.cell_type == "code")
    first.source += "\n\nimport os\nos._exit(1)  # the kernel dies here"
    course.submit(CRASH, FIXTURE, crash)
    garbled = {n: solved_version(rel[n], src[n]) for n in names}
    garbled["theory.ipynb"] = b'{"cells": [ this is not JSON \xff'
    course.submit(GARBLED, FIXTURE, garbled)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded serially in one copy of the course and 3 at a time in another."""
    base = tmp_path_factory.mktemp("pargrade")
    serial, par = base / "serial", base / "parallel"
    build_class(serial)
    shutil.copytree(serial, par)  # nbgrader_config.py finds its root from its own location
    out = {}
    for root, workers in ((serial, 1), (par, 3)):
        t = time.perf_counter()
        runs = autograde_class(root, FIXTURE, workers=workers)
        out[workers] = (root, runs, time.perf_counter() - t)
    return out


def _gradebook_view(root: Path) -> dict:
    """Everything read_results says, per student, notebook and cell."""
    view = {}
    for s in CLASS:
        res = read_results(root, FIXTURE, s)
        view[s] = {nb.name: (nb.status, [(c.grade_id, c.kind, c.points, c.max_points) for c in nb.cells])
                   for nb in res.notebooks}
    return view


def test_statuses_and_isolation(graded):
    for workers, (root, runs, _) in graded.items():
        assert [r.student for r in runs] == CLASS
        status = {r.student: r.status for r in runs}
        assert status == {s: ("failed" if s in BAD else "ok") for s in CLASS}, (workers, status)
        by = {r.student: r for r in runs}
        assert "DeadKernelError" in by[CRASH].log, by[CRASH].log_tail()
        assert by[GARBLED].returncode != 0 and by[GARBLED].log
        for s in FRACTIONS:  # the others are graded in full, whatever happened next to them
            res = read_results(root, FIXTURE, s)
            assert [n.status for n in res.notebooks] == ["graded", "graded"], (workers, s, res)
        for s in BAD:
            res = read_results(root, FIXTURE, s)
            assert any(n.status == "failed" for n in res.notebooks), (workers, s, res)


def test_serial_and_parallel_gradebooks_agree(graded):
    serial, par = _gradebook_view(graded[1][0]), _gradebook_view(graded[3][0])
    assert serial == par
    score = {s: read_results(graded[3][0], FIXTURE, s).score("tests") for s in FRACTIONS}
    assert score["s1_solved"] == 6 and score["s2_blank"] == 0 and 0 < score["s3_half"] < 6, score
    from nbgrader.api import Gradebook
    for root in (graded[1][0], graded[3][0]):
        with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
            assert sorted(s.id for s in gb.students) == sorted(CLASS)


def test_no_lock_errors_and_really_parallel(graded):
    for workers, (_, runs, _) in graded.items():
        for r in runs:
            assert "database is locked" not in r.log, (workers, r.student, r.log_tail())
            assert r.attempts == 1, (workers, r.student, r.notes)
    runs = graded[3][1]
    # at some moment, more than one student was being graded
    overlap = max(sum(1 for r in runs if r.started <= t < r.finished) for t in (x.started for x in runs))
    assert overlap >= 2, [(r.student, r.started, r.finished) for r in runs]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solutions_lib", "autograde", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_cli_exit_code_and_table(graded):
    """The real command line, on the crashing student alone: exit status 1, the table, why."""
    root = graded[3][0]
    p = _cli(FIXTURE, "--root", str(root), "--workers", "2", "--student", CRASH)
    assert p.returncode == 1, p.stdout + p.stderr
    rows = {ln.split()[0]: ln.split()[1] for ln in p.stdout.splitlines() if ln.startswith(CRASH + " ")}
    assert rows == {CRASH: "failed"}, p.stdout
    assert "speed-up" in p.stdout and "DeadKernelError: Kernel died" in p.stdout, p.stdout


def test_cli_setup_errors(graded, capsys):
    from solutions_lib.__main__ import main

    root = graded[3][0]
    assert main(["autograde", "no_such_assignment", "--root", str(root)]) == 2
    assert "no assignment 'no_such_assignment'" in capsys.readouterr().err
    assert main(["autograde", FIXTURE, "--root", str(root), "--student", "nobody_here"]) == 2
    err = capsys.readouterr().err
    assert "no submission" in err and "nobody_here" in err, err
    # in source/ and submitted/, but never generated: not in the gradebook
    (root / "source" / "99_not_generated").mkdir()
    (root / "submitted" / "s1_solved" / "99_not_generated").mkdir()
    assert main(["autograde", "99_not_generated", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "not in the gradebook" in err and "nbgrader generate_assignment 99_not_generated" in err, err


def test_lock_error_is_retried(monkeypatch, tmp_path):
    calls = []

    def fake_run_once(root, assignment, student, timeout, extra=(), env=None):
        calls.append(student)
        if len(calls) == 1:
            return 1, "sqlite3.OperationalError: database is locked\n", False
        return 0, "graded\n", False

    monkeypatch.setattr(parallel, "_run_once", fake_run_once)
    monkeypatch.setattr(parallel.time, "sleep", lambda s: None)
    run = parallel.grade_student(tmp_path, FIXTURE, "s1")
    assert (run.status, run.attempts, len(calls)) == ("ok", 2, 2), run
    assert "locked" in run.notes[0]
    # a failure that is not a lock is not retried
    monkeypatch.setattr(parallel, "_run_once", lambda *a: (1, "DeadKernelError: Kernel died\n", False))
    run = parallel.grade_student(tmp_path, FIXTURE, "s1")
    assert (run.status, run.attempts, run.reason) == ("failed", 1, "DeadKernelError: Kernel died")


def test_busy_timeout_only_for_sqlite():
    assert parallel.busy_timeout_url("sqlite:////c/gradebook.db") == "sqlite:////c/gradebook.db?timeout=60"
    assert parallel.busy_timeout_url("sqlite:////c/gradebook.db?timeout=5") is None  # the course chose
    assert parallel.busy_timeout_url("postgresql+psycopg2://u:p@h/db") is None


def test_timeout_kills_the_whole_process_group(monkeypatch, tmp_path):
    """--timeout-per-student: the run and its children (the kernel) are killed."""
    pidfile = tmp_path / "child.pid"
    fake = tmp_path / "nbgrader"
    fake.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setattr(parallel, "nbgrader_executable", lambda: str(fake))
    t = time.perf_counter()
    run = parallel.grade_student(tmp_path, FIXTURE, "s1", timeout=1)
    assert run.status == "timeout" and time.perf_counter() - t < 20, run
    child = int(pidfile.read_text())
    for _ in range(50):
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        pytest.fail("the child of the timed-out run survived")


def test_workers_share_out_the_cpus(monkeypatch):
    from solutions_lib.course.parallel import thread_env

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert thread_env(4)["OMP_NUM_THREADS"] == "4" and thread_env(32)["MKL_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert thread_env(4)["OMP_NUM_THREADS"] == "3"


def test_shard_and_claim_are_gone_and_say_what_replaced_them(capsys):
    from solutions_lib.__main__ import main
    for flag in (["--shard", "1/2"], ["--claim", "exam-1"]):
        assert main(["autograde", "A", *flag]) == 2
        assert "python -m solutions_lib grade A --scheduler" in capsys.readouterr().err
