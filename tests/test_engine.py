"""Grading a class on Dask (solutions_lib/course/engine.py) with stateless workers.

A real `dask scheduler` and `dask worker` processes, each started as its own subprocess in its
own folder (own HOME, scratch folder and trusted-run cache: no course file on a worker but what
the tasks carry), grade the fixture class with stock nbgrader on the workers; the head records
everything in one course root and one gradebook. Checked here, each by measuring it:

- every student-notebook graded exactly once, by both workers, and the gradebook (scores,
  "needs a person" flags, comments) and the results read back equal those of stock serial
  `nbgrader autograde` of the same class in a copy of the course; feedback made on the head;
- a worker killed (SIGKILL to its whole process group) while it grades loses nothing: every
  notebook still graded once, same scores; a worker whose grading kernel cannot import the
  course package (the package deployed beside the venv, through PYTHONPATH: the sandbox's
  kernel never sees it) refuses loudly and gets no student;
- the embedded LocalCluster grades a class of bad files (renamed, double, foreign, empty,
  corrupt, nbformat 4.4, a unicode student id): each valid notebook graded, each bad one
  failed alone with the intake's reason.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from conftest import FIXTURE, ROOT, write_fixture_course
from solutions_lib.course import engine
from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, read_results, solved_version

pytestmark = [pytest.mark.nbgrader, pytest.mark.xdist_group("engine")]

PY = sys.executable
CLASS = {"s1_solved": 1.0, "s2_blank": 0.0, "s3_half": 0.5}
NOTEBOOKS = ("exercises", "theory")


def build_class(root: Path, fractions: dict[str, float] = CLASS) -> Course:
    """The fixture course (cell timeout 30 s: this machine is shared), generated, with a class."""
    write_fixture_course(root)
    cfg = root / "nbgrader_config.py"
    cfg.write_text(cfg.read_text().replace("cell_timeout=5", "cell_timeout=30"))
    course = Course(root, cell_timeout=30)
    course.generate(FIXTURE)
    for student, fraction in fractions.items():
        course.submit(student, FIXTURE, {f"{n}.ipynb": _solved(course, root, n, fraction) for n in NOTEBOOKS})
    return course


def _solved(course: Course, root: Path, name: str, fraction: float = 1.0):
    return solved_version(course.release_notebook(FIXTURE, f"{name}.ipynb"),
                          nbs.read(root / "source" / FIXTURE / f"{name}.ipynb"), fraction)


def gradebook_view(root: Path, students) -> dict:
    """Everything autograde records per student, notebook and cell, and what read_results says."""
    from nbgrader.api import Gradebook

    view = {}
    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        for s in students:
            sub = gb.find_submission(FIXTURE, s)
            view[s] = {"timestamp": str(sub.timestamp), "late": float(sub.late_submission_penalty or 0)}
            for nb in sub.notebooks:
                view[s][nb.name] = sorted((g.name, g.auto_score, g.manual_score, g.needs_manual_grade,
                                           float(g.max_score)) for g in nb.grades)
                view[s][nb.name + "/comments"] = sorted((c.name, c.auto_comment) for c in nb.comments)
            res = read_results(root, FIXTURE, s)
            view[s]["results"] = [(n.name, n.status, [(c.grade_id, c.points, c.messages) for c in n.cells])
                                  for n in res.notebooks]
    return view


def _env(folder: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAS_COURSE_ROOT", "DASK_"))}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "home").mkdir(exist_ok=True)
    env.update(HOME=str(folder / "home"), TAS_ENGINE_DIR=str(folder / "scratch"),
               TAS_TRUSTED_CACHE=str(folder / "cache" / "trusted"), TMPDIR=str(folder),
               PATH=os.pathsep.join([os.path.dirname(PY), env.get("PATH", "")]))
    env.update(extra)
    return env


class Cluster:
    """A scheduler and named workers, each a subprocess group in its own folder."""

    def __init__(self, base: Path):
        self.base, self.procs = base, {}
        self.file = base / "scheduler.json"
        self.procs["scheduler"] = subprocess.Popen(
            [PY, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(self.file)], cwd=base, env=_env(base / "scheduler"),
            stdout=subprocess.DEVNULL, stderr=open(base / "scheduler.log", "w"), start_new_session=True)
        deadline = time.time() + 120
        while not (self.file.is_file() and self.file.stat().st_size):
            assert time.time() < deadline and self.procs["scheduler"].poll() is None, (base / "scheduler.log").read_text()
            time.sleep(0.3)
        self.address = json.loads(self.file.read_text())["address"]

    def worker(self, name: str, **env) -> subprocess.Popen:
        """A `dask worker` in its own folder (HOME, scratch, temp). The good workers share one
        trusted-run cache, as workers on one host do (~/.cache): each source notebook's
        solution then runs once per host, not once per worker."""
        folder = self.base / name
        if "PYTHONPATH" not in env:
            env.setdefault("TAS_TRUSTED_CACHE", str(self.base / "host-cache" / "trusted"))
        folder.mkdir(parents=True, exist_ok=True)
        p = subprocess.Popen([PY, "-m", "distributed.cli.dask_worker", self.address, "--name", name, "--nthreads", "1",
                              "--no-dashboard", "--local-directory", str(folder / "dask")],
                             cwd=folder, env=_env(folder, **env), stdout=subprocess.DEVNULL,
                             stderr=open(self.base / f"{name}.log", "w"), start_new_session=True)
        self.procs[name] = p
        return p

    def kill(self, name: str) -> None:
        try:
            os.killpg(self.procs[name].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.procs[name].wait(timeout=30)

    def close(self) -> None:
        for name in reversed(list(self.procs)):
            if self.procs[name].poll() is None:
                self.kill(name)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("dask"))
    c.worker("wA")
    c.worker("wB")
    try:
        yield c
    finally:
        c.close()


def _client(cluster):
    from distributed import Client
    return Client(cluster.address, timeout=60)


def test_cluster_grades_each_notebook_once_like_serial_stock_nbgrader(cluster, tmp_path, capsys):
    head, serial = tmp_path / "head", tmp_path / "serial"
    build_class(head)
    shutil.copytree(head, serial)
    run = engine.grade_class(head, FIXTURE, workers=2, scheduler=cluster.address)
    assert run.ok and not run.refused, engine.format_class(run)
    graded = [(r.student, r.notebook) for r in run.runs]
    assert sorted(graded) == sorted((s, n) for s in CLASS for n in NOTEBOOKS), graded   # each once
    assert {r.status for r in run.runs} == {"graded"}
    assert len({r.worker for r in run.runs}) == 2, "both workers graded"
    for s in CLASS:
        for n in NOTEBOOKS:
            assert (head / "autograded" / s / FIXTURE / f"{n}.ipynb").is_file()
    proc = subprocess.run([str(Path(PY).with_name("nbgrader")), "autograde", FIXTURE, "--force"], cwd=serial,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    mine, stock = gradebook_view(head, CLASS), gradebook_view(serial, CLASS)
    assert mine == stock
    assert [n[1] for n in mine["s1_solved"]["results"]] == ["graded", "graded"]
    total = {s: sum(p or 0 for _, _, cells in mine[s]["results"] for _, p, _ in cells) for s in CLASS}
    assert total["s1_solved"] == 6 and total["s2_blank"] == 0 and 0 < total["s3_half"] < 6, total
    # feedback on the head, from what the workers sent back
    fb = subprocess.run([str(Path(PY).with_name("nbgrader")), "generate_feedback", FIXTURE, "--force"], cwd=head,
                        capture_output=True, text=True, timeout=600)
    assert fb.returncode == 0, fb.stdout[-2000:] + fb.stderr[-2000:]
    for s in CLASS:
        assert {p.name for p in (head / "feedback" / s / FIXTURE).glob("*.html")} == {f"{n}.html" for n in NOTEBOOKS}


def _package_clone(dest: Path) -> Path:
    """A copy of the course package outside the venv (a clone that is not the installed one)."""
    shutil.copytree(ROOT / "solutions_lib", dest / "solutions_lib", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_killed_worker_loses_nothing_and_misdeployed_worker_refuses(cluster, tmp_path, capfd):
    from solutions_lib.course.sandbox import sandbox_available
    if os.environ.get("TAS_SANDBOX", "on") == "off" or not sandbox_available()[0]:
        pytest.skip("the mis-deployment shows only where kernels run sandboxed (bubblewrap)")
    head = tmp_path / "head"
    two = {s: CLASS[s] for s in ("s1_solved", "s3_half")}
    build_class(head, two)
    cluster.worker("wC")
    # the nbgrader process imports the package from PYTHONPATH; the sandboxed kernel (empty
    # environment) can only find the installed one, which the sandbox does not mount
    clone = _package_clone(tmp_path / "clone")
    cluster.worker("wD", PYTHONPATH=str(clone))
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(run=engine.grade_class(head, FIXTURE, workers=4,
                                                                          scheduler=cluster.address)))
    t.start()
    killed = None
    with _client(cluster) as client:
        deadline = time.time() + 600
        while t.is_alive() and time.time() < deadline and killed is None:
            names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
            for addr, keys in client.processing().items():
                if names.get(addr) == "wC" and any(str(k).startswith("tas-grade") for k in keys):
                    time.sleep(2.0)     # nbgrader is running the student's notebook now
                    cluster.kill("wC")
                    killed = addr
            time.sleep(0.2)
    t.join(timeout=900)
    assert killed, "wC never got a student-notebook to grade"
    run = box["run"]
    err = capfd.readouterr().err
    assert run.ok, engine.format_class(run)
    assert sorted((r.student, r.notebook) for r in run.runs) == sorted((s, n) for s in two for n in NOTEBOOKS)
    assert {r.status for r in run.runs} == {"graded"}
    # the mis-deployed worker: refused, loudly, with the kernel's own error, and given nothing
    [(bad_addr, why)] = list(run.refused.items())
    assert "WORKER REFUSED" in err and bad_addr in err
    assert "No module named 'solutions_lib'" in why, why
    bad_pid = why.split(" ")[0]
    assert all(r.worker != bad_pid for r in run.runs)
    total = {s: sum(r.score for r in run.runs if r.student == s) for s in two}
    assert total == {"s1_solved": 6.0, "s3_half": 5.0}, total   # auto points (written answers: a person)
    views = gradebook_view(head, two)
    assert all(n[1] == "graded" for s in two for n in views[s]["results"])


def _v44(nb) -> str:
    """The notebook as nbformat 4.4 writes it (no cell ids)."""
    d = json.loads(nbformat.writes(nb))
    d["nbformat_minor"] = 4
    for c in d["cells"]:
        c.pop("id", None)
    return json.dumps(d)


def test_local_cluster_grades_each_valid_notebook_of_a_bad_file_class(tmp_path):
    root = tmp_path / "course"
    course = build_class(root, {})
    other = root / "source" / "00_other"
    other.mkdir(parents=True)
    nbs.write(nbs.normalise(nbs.new_notebook([nbs.answer("halve", "def halve(x):\n    ### BEGIN SOLUTION\n    return x / 2\n    ### END SOLUTION"),
                                              nbs.tests("halve_tests", "assert halve(4) == 2", 1, [])])),
              other / "exercises.ipynb")
    ex, th = _solved(course, root, "exercises"), _solved(course, root, "theory")
    blank = course.release_notebook(FIXTURE, "exercises.ipynb")
    course.submit("renamed", FIXTURE, {"exercises (1).ipynb": ex, "theory.ipynb": _v44(th)})
    course.submit("foreign_empty", FIXTURE, {"exercises.ipynb": (other / "exercises.ipynb").read_text(),
                                             "theory.ipynb": b""})
    course.submit("zoë_double", FIXTURE, {"exercises.ipynb": ex, "exercises (1).ipynb": blank,
                                         "theory.ipynb": b'{"cells": [ not json'})
    run = engine.grade_class(root, FIXTURE, workers=2)
    got = {(r.student, r.notebook): (r.status, r.score) for r in run.runs}
    assert got == {("renamed", "exercises"): ("graded", 5.0), ("renamed", "theory"): ("graded", 1.0),
                   ("foreign_empty", "exercises"): ("failed", 0.0), ("foreign_empty", "theory"): ("failed", 0.0),
                   ("zoë_double", "exercises"): ("graded", 5.0), ("zoë_double", "theory"): ("failed", 0.0)}, got
    why = {(r.student, r.notebook): r.reason for r in run.runs}
    assert "00_other/exercises.ipynb" in why[("foreign_empty", "exercises")]
    assert "is empty" in why[("foreign_empty", "theory")]
    assert "not valid JSON" in why[("zoë_double", "theory")]
    notes = " ".join(run.notes["renamed"] + run.notes["zoë_double"])
    assert "'exercises (1).ipynb' graded as exercises.ipynb" in notes and "double submission" in notes
    res = {s: {n.name: (n.status, n.score("tests")) for n in read_results(root, FIXTURE, s).notebooks}
           for s in ("renamed", "foreign_empty", "zoë_double")}
    assert res["renamed"] == {"exercises.ipynb": ("graded", 5.0), "theory.ipynb": ("graded", 1.0)}
    assert res["zoë_double"]["exercises.ipynb"] == ("graded", 5.0)
    assert {s for s, _ in res["foreign_empty"].values()} == {"failed"}
    assert res["zoë_double"]["theory.ipynb"][0] == "failed"


def test_cli_setup_error_and_table(tmp_path, capsys):
    root = tmp_path / "course"
    write_fixture_course(root)
    assert engine.main([FIXTURE, "--root", str(root)]) == 2
    assert "no submissions" in capsys.readouterr().err
    from solutions_lib.course import engine_feedback
    assert engine_feedback.main([FIXTURE, "--root", str(root)]) == 2
    assert "nothing autograded" in capsys.readouterr().err
    r = engine.ClassRun(FIXTURE, [engine.NotebookRun("s", "exercises", "failed", reason="kernel died")], wall=1.0)
    assert not r.ok and "s/exercises: failed: kernel died" in engine.format_class(r)


def test_feedback_on_the_engine_equals_stock_generate_feedback_on_the_head(tmp_path):
    """Each student's feedback made on a worker from what the task carries (the autograded
    folder and a snapshot of the gradebook) is byte for byte what stock `nbgrader
    generate_feedback` writes on the head; a student never graded is reported, not failed."""
    from solutions_lib.course import engine_feedback

    root = tmp_path / "course"
    build_class(root)
    nbgrader = str(Path(PY).with_name("nbgrader"))
    for cmd in (["autograde", FIXTURE, "--force"], ["generate_feedback", FIXTURE, "--force"]):
        proc = subprocess.run([nbgrader, *cmd], cwd=root, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    stock = {p.relative_to(root / "feedback"): p.read_bytes() for p in (root / "feedback").rglob("*") if p.is_file()}
    assert len([p for p in stock if p.suffix == ".html"]) == 2 * len(CLASS)
    shutil.rmtree(root / "feedback")
    (root / "autograded" / "never_graded" / FIXTURE).mkdir(parents=True)
    run = engine_feedback.feedback_class(root, FIXTURE, list(CLASS) + ["never_graded"], workers=2)
    assert run.ok, engine_feedback.format_feedback(run)
    assert {r.student: r.status for r in run.runs} == {**{s: "done" for s in CLASS}, "never_graded": "not graded"}
    mine = {p.relative_to(root / "feedback"): p.read_bytes() for p in (root / "feedback").rglob("*") if p.is_file()}
    assert mine.keys() == stock.keys()
    assert [str(p) for p in mine if mine[p] != stock[p]] == []


def test_gradebook_snapshot_row_by_row_opens_like_the_original(tmp_path):
    """The PostgreSQL path of the snapshot (nbgrader's tables and alembic_version copied row by
    row), run here from a SQLite gradebook: nbgrader opens the copy without migrating it and reads
    the same assignment, notebooks and cells."""
    from nbgrader.api import Gradebook

    from solutions_lib.course import engine_feedback

    root = tmp_path / "course"
    build_class(root, {})
    url = "sqlite:///" + str(root / "gradebook.db")
    copy = tmp_path / "copy.db"
    engine_feedback._copy_rows(url, "sqlite:///" + str(copy))

    def view(u):
        with Gradebook(u) as gb:
            a = gb.find_assignment(FIXTURE)
            return sorted((nb.name, sorted((c.name, c.max_score) for c in nb.grade_cells),
                           sorted(c.name for c in nb.source_cells)) for nb in a.notebooks)
    assert view("sqlite:///" + str(copy)) == view(url)
    snap = tmp_path / "snap.db"
    snap.write_bytes(engine_feedback.snapshot_gradebook(url))
    assert view("sqlite:///" + str(snap)) == view(url)
