"""The multi-user path: nbgrader's exchange with stock commands, and the PostgreSQL switch.

One instructor course (the fixture course, configured by `apply_course_config`) and two
students, each with its own HOME, working folder and nbgrader config (course id, exchange
root), share a local exchange folder:

    instructor: generate_assignment (nbgrader's API, in-process), nbgrader release_assignment A
    students:   nbgrader fetch_assignment A --course training-at-scale; nbgrader submit A --course ...
    instructor: nbgrader collect A; (a late resubmission by bob) nbgrader collect A --update;
                nbgrader autograde A --force

All commands run as one Unix user, so nbgrader's student id comes from each student's
config (`CourseDirectory.student_id`) rather than from the login name, and the owner check
of `collect` (a submission owned by someone else than the student it names) fires for every
submission. The inbox permissions are checked by their modes; when the tests run as root,
also as a second user (`nobody`, through `ls`/`cat`), which is what an other student sees.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from conftest import FIXTURE, ROOT, write_fixture_course
from solutions_lib.course import notebooks as nbs
from solutions_lib.course.config import COURSE_ID, apply_course_config
from solutions_lib.course.grader import Course

NBGRADER = str(Path(sys.executable).with_name("nbgrader"))
STUDENTS = ("alice", "bob")


def run_nbgrader(*args: str, cwd: Path, env: dict | None = None) -> str:
    proc = subprocess.run([NBGRADER, *args], cwd=cwd, env=env, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{log}"
    return log


def run_students(homes: dict[str, Path], *args: str) -> None:
    """The same nbgrader command for every student at once, each in its own HOME."""
    procs = {s: subprocess.Popen([NBGRADER, *args], cwd=home, env=student_env(home), text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for s, home in homes.items()}
    for s, proc in procs.items():
        log = proc.communicate()[0]
        assert proc.returncode == 0, f"{s}: nbgrader {' '.join(args)} failed ({proc.returncode}):\n{log}"


def student_env(home: Path) -> dict:
    """A student's environment: own HOME (so own ~/.jupyter, ~/.local/share/jupyter/nbgrader_cache)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "TAS_"))}
    env["HOME"] = str(home)
    return env


def student_config(student: str, exchange: Path) -> str:
    """What a student's nbgrader_config.py needs to find the course in the exchange."""
    return ("c = get_config()\n"
            f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
            f"c.Exchange.root = {str(exchange)!r}\n"
            "c.Exchange.path_includes_course = True\n"
            # One Unix user runs every student here; on a hub the login name is the id.
            f"c.CourseDirectory.student_id = {student!r}\n")


def answer(nb_path: Path, grade_id: str, source: str) -> None:
    """Edit an answer cell in place, as the student would in JupyterLab."""
    nb = nbformat.read(nb_path, as_version=4)
    cell = next(c for c in nb.cells if nbs.nbgrader_md(c).get("grade_id") == grade_id)
    cell.source = source
    nbformat.write(nb, nb_path)


def scores(course: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        return {s.id: gb.find_submission(FIXTURE, s.id).score for s in gb.students}


def as_nobody(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), user=65534, group=65534, extra_groups=[], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})


@pytest.fixture
def shared_tmp():
    """A folder a second Unix user can traverse (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="tas-exchange-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.nbgrader
def test_release_fetch_submit_collect_autograde(tmp_path, shared_tmp, monkeypatch):
    monkeypatch.delenv("TAS_DB_URL", raising=False)
    exchange = shared_tmp / "exchange"
    exchange.mkdir()
    exchange.chmod(0o1777)  # world-writable + sticky, like /tmp (nbgrader needs o+rwx)

    course = write_fixture_course(tmp_path / "course")
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"c.Exchange.root = {str(exchange)!r}\n")
    Course(course, cell_timeout=5).generate(FIXTURE)  # = nbgrader generate_assignment --force, in-process
    run_nbgrader("release_assignment", FIXTURE, cwd=course)

    course_dir = exchange / COURSE_ID
    inbound, outbound = course_dir / "inbound", course_dir / "outbound"
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(exchange) == 0o1777, oct(mode(exchange))  # nbgrader checks the 0o777 bits only
    assert mode(course_dir) == 0o755 and mode(outbound) == 0o755
    assert mode(inbound) == 0o2733, oct(mode(inbound))  # setgid, write+search only: not listable
    assert sorted(p.name for p in (outbound / FIXTURE).iterdir()) == ["exercises.ipynb", "theory.ipynb"]

    # Two students fetch; alice answers before submitting, bob hands in the blank release.
    homes = {s: tmp_path / "home" / s for s in STUDENTS}
    for s, home in homes.items():
        home.mkdir(parents=True)
        (home / "nbgrader_config.py").write_text(student_config(s, exchange))
    run_students(homes, "fetch_assignment", FIXTURE, "--course", COURSE_ID)
    for home in homes.values():
        work = home / COURSE_ID / FIXTURE  # path_includes_course: ./<course>/<assignment>
        assert (work / "exercises.ipynb").is_file() and (work / "theory.ipynb").is_file()
    work = homes["alice"] / COURSE_ID / FIXTURE
    answer(work / "exercises.ipynb", "square", "def square(x):\n    return x * x")
    answer(work / "exercises.ipynb", "cube", "def cube(x):\n    return x ** 3")
    answer(work / "theory.ipynb", "double", "def double(x):\n    return 2 * x")
    run_students(homes, "submit", FIXTURE, "--course", COURSE_ID)

    subs = {p.name.split("+")[0]: p for p in inbound.iterdir()}
    assert sorted(subs) == list(STUDENTS)
    for p in subs.values():
        # <student>+<assignment>+<timestamp to the microsecond>+<12-character random string>
        assert re.fullmatch(rf"[a-z]+\+{FIXTURE}\+\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{{6}} \S+\+[\w-]{{12}}",
                            p.name), p.name
        assert mode(p) == 0o777  # so that the instructor can delete it
        assert {f.name: mode(f) for f in p.iterdir()} == {
            "exercises.ipynb": 0o644, "theory.ipynb": 0o644, "timestamp.txt": 0o644, "submission_secret.txt": 0o644}

    if os.geteuid() == 0:
        # What another user sees: the release, not the list of submissions. A submission
        # whose full name is known stays readable: the name (timestamp + random) is the guard.
        assert as_nobody("ls", str(outbound / FIXTURE)).returncode == 0
        denied = as_nobody("ls", str(inbound))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr, denied
        assert as_nobody("cat", str(subs["alice"] / "exercises.ipynb")).returncode == 0
        assert as_nobody("mkdir", str(inbound / "nobody+x")).returncode == 0  # anyone may submit
        (inbound / "nobody+x").rmdir()

    log = run_nbgrader("collect", FIXTURE, cwd=course)
    # One Unix user owns every submission, so collect's owner check flags each of them.
    assert log.count("cheating attempt?") == 2, log
    assert sorted(p.name for p in (course / "submitted").iterdir()) == list(STUDENTS)
    bob_square = lambda: next(c.source for c in nbformat.read(  # noqa: E731
        course / "submitted" / "bob" / FIXTURE / "exercises.ipynb", as_version=4).cells
        if nbs.nbgrader_md(c).get("grade_id") == "square")
    assert "raise NotImplementedError" in bob_square()  # his first, blank submission

    # A late resubmission after the collect: bob answers `square` and submits again.
    work = homes["bob"] / COURSE_ID / FIXTURE
    answer(work / "exercises.ipynb", "square", "def square(x):\n    return x * x")
    run_students({"bob": homes["bob"]}, "submit", FIXTURE, "--course", COURSE_ID)
    assert len(list(inbound.glob(f"bob+{FIXTURE}+*"))) == 2  # the exchange keeps both

    log = run_nbgrader("collect", FIXTURE, "--update", cwd=course)
    assert "Updating submission: bob" in log and "No newer submission to collect: alice" in log, log
    assert "return x * x" in bob_square()  # replaced by the late one

    run_nbgrader("autograde", FIXTURE, "--force", cwd=course)
    # alice: square 2 + cube 3 + double 1 (the written answer waits for a person);
    # bob: the late submission's square.
    assert scores(course) == {"alice": 6.0, "bob": 2.0}


def test_tas_db_url_moves_the_instructor_gradebook(monkeypatch, tmp_path):
    """$TAS_DB_URL replaces the SQLite gradebook of the instructor's course, as stock
    nbgrader reads it from nbgrader_config.py; temporary courses keep their own SQLite."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    url = "postgresql+psycopg2://grader:secret@db.example.org:5432/training_at_scale"
    monkeypatch.setenv("TAS_DB_URL", url)
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert CourseDirectory(config=cfg).db_url == url

    c = Config()
    apply_course_config(c, root=str(tmp_path))  # a temporary course (tests, the self-check)
    assert c.CourseDirectory.db_url == "sqlite:///" + str(tmp_path / "gradebook.db")

    monkeypatch.delenv("TAS_DB_URL")
    c = Config()
    apply_course_config(c, root=str(ROOT))
    assert c.CourseDirectory.db_url == "sqlite:///" + os.path.join(str(ROOT), "gradebook.db")
