"""A real PostgreSQL gradebook: a throw-away cluster (initdb and pg_ctl as an unprivileged user,
a Unix socket in a temporary folder, a free port), and the course graded against it.

- The fixture class of test_parallel_grading (solved, blank, half, a kernel that dies, a
  garbled notebook) graded with SQLite (the baseline), then with PostgreSQL by stock serial
  `nbgrader autograde A --force` and by parallel autograde (every student at once):
  every cell's score identical to SQLite, no submission or grade row lost or doubled; then
  stock `generate_feedback`, `export` and the grade report, identical to the SQLite ones.
- Several grading hosts share a class through the grading engine (course/engine.py,
  tests/test_engine.py), which records every result in the head's one gradebook: the old
  `--shard`/`--claim` hosts sharing a PostgreSQL gradebook are gone.

The gradebook URL reaches a temporary course through TAS_DB_URL and TAS_DB_URL_ROOT
(config.gradebook_url). Needs Debian's `postgresql` (initdb, pg_ctl) and `psycopg2-binary`
(dev extras); skipped, saying why, without them, unless TAS_REQUIRE_POSTGRES=1 (CI), where
the skip is a failure.
"""
from __future__ import annotations

import csv
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import FIXTURE
from solutions_lib.course import nbgrader_cmd
from solutions_lib.course.grader import read_results
from solutions_lib.course.parallel import autograde_class
from solutions_lib.course.report import write_report
from test_parallel_grading import BAD, CLASS, FRACTIONS, build_class

pytestmark = [pytest.mark.nbgrader, pytest.mark.xdist_group("postgres")]


# ------------------------------------------------------------------ the throw-away server

def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    return Path(which).parent if which else None


def _unavailable() -> str | None:
    if _pg_bin() is None:
        return "no PostgreSQL server (initdb); install with: apt-get install -y postgresql"
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return "no psycopg2; install with: pip install psycopg2-binary (in the dev extras)"
    if os.geteuid() == 0 and not shutil.which("runuser"):
        return "running as root without runuser: cannot start PostgreSQL as an unprivileged user"
    return None


def _server_user() -> str | None:
    """PostgreSQL refuses to run as root: as root, run it as `postgres` (Debian's package makes
    that user) or `nobody`."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    pytest.fail("running as root, and neither a `postgres` nor a `nobody` user exists")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.bin = _pg_bin()
        self.user = _server_user()
        self.dir = Path(tempfile.mkdtemp(prefix="tas-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()

    def _run(self, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
        argv = [str(self.bin / cmd[0]), *cmd[1:]]
        if self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.dir)

    def start(self) -> "Server":
        if self.user:
            shutil.chown(self.dir, self.user)
        os.chmod(self.dir, 0o700)
        p = self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync",
                      "-E", "UTF8", "--no-locale")
        assert p.returncode == 0, f"initdb failed:\n{p.stdout}\n{p.stderr}"
        # Unix socket only (no TCP), in our own folder; fsync off: a throw-away cluster
        opts = f"-k {self.dir} -h '' -p {self.port} -F -c max_connections=200"
        p = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-o", opts,
                      "-w", "-t", "60", "start")
        assert p.returncode == 0, f"pg_ctl start failed:\n{p.stdout}\n{p.stderr}\n{self.log()}"
        return self

    def log(self) -> str:
        try:
            return (self.dir / "server.log").read_text()[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def create_database(self, name: str) -> str:
        import psycopg2

        conn = psycopg2.connect(dbname="postgres", user="postgres", host=str(self.dir), port=self.port)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return f"postgresql+psycopg2://postgres@/{name}?host={self.dir}&port={self.port}"


@pytest.fixture(scope="module")
def pg():
    why = _unavailable()
    if why:
        if os.environ.get("TAS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"TAS_REQUIRE_POSTGRES=1 and the PostgreSQL tests cannot run: {why}", pytrace=False)
        pytest.skip(why)
    server = Server().start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def gradebook(url: str, *roots: Path):
    """TAS_DB_URL=url for the course roots `roots` (this process and the nbgrader it starts)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TAS_DB_URL", url)
        mp.setenv("TAS_DB_URL_ROOT", os.pathsep.join(str(r) for r in roots))
        yield


def nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(nbgrader_cmd.command(*args), cwd=root, capture_output=True, text=True, timeout=600)


def view(root: Path, students=CLASS) -> dict:
    """Everything read_results says, per student, notebook and cell."""
    out = {}
    for s in students:
        res = read_results(root, FIXTURE, s)
        out[s] = {nb.name: (nb.status, [(c.grade_id, c.kind, c.points, c.max_points) for c in nb.cells])
                  for nb in res.notebooks}
    return out


def row_counts(url: str) -> dict:
    """Per student: submissions, submitted notebooks and grades in the gradebook (no doubles)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as c:
            rows = c.execute(text(
                "SELECT st.id, count(DISTINCT sa.id), count(DISTINCT sn.id), count(g.id) "
                "FROM student st LEFT JOIN submitted_assignment sa ON sa.student_id = st.id "
                "LEFT JOIN submitted_notebook sn ON sn.assignment_id = sa.id "
                "LEFT JOIN grade g ON g.notebook_id = sn.id GROUP BY st.id")).all()
            dup = c.execute(text(
                "SELECT count(*) FROM (SELECT notebook_id, cell_id FROM grade "
                "GROUP BY notebook_id, cell_id HAVING count(*) > 1) d")).scalar_one()
    finally:
        engine.dispose()
    assert dup == 0, f"{dup} doubled grade rows"
    return {r[0]: tuple(r[1:]) for r in rows}


def csv_rows(path: Path, drop=()) -> list[dict]:
    with open(path, newline="") as f:
        return sorted((({k: v for k, v in r.items() if k not in drop}) for r in csv.DictReader(f)),
                      key=lambda r: sorted(r.items()))


# ------------------------------------------------------------------ one class, three gradebooks

@pytest.fixture(scope="module")
def graded(pg, tmp_path_factory):
    base = tmp_path_factory.mktemp("pg")
    sqlite_root, serial_root, par_root = base / "sqlite", base / "pg_serial", base / "pg_parallel"
    build_class(sqlite_root)  # generated into its SQLite gradebook; the submissions are in place
    t = time.perf_counter()
    runs = autograde_class(sqlite_root, FIXTURE, workers=3)
    times = {"sqlite, 3 workers": time.perf_counter() - t}
    out = {"sqlite": (sqlite_root, "sqlite:///" + str(sqlite_root / "gradebook.db"), runs)}
    for root, db, how in ((serial_root, "serial", "stock"), (par_root, "parallel", "workers")):
        build_class(root)
        (root / "gradebook.db").unlink()  # generated again below, into PostgreSQL
        url = pg.create_database(db)
        with gradebook(url, root):
            p = nbgrader(root, "generate_assignment", FIXTURE, "--force")
            assert p.returncode == 0, p.stdout + p.stderr
            assert not (root / "gradebook.db").exists()
            t = time.perf_counter()
            if how == "stock":  # one stock process, every student in turn
                p = nbgrader(root, "autograde", FIXTURE, "--force")
                runs = p
            else:  # every student at once: concurrent writers
                runs = autograde_class(root, FIXTURE, workers=len(CLASS))
            times[f"postgres, {how}"] = time.perf_counter() - t
        out[db] = (root, url, runs)
    print("grading times:", {k: round(v, 1) for k, v in times.items()})
    return out


def test_gradebook_is_postgres(graded):
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    root, url, _ = graded["parallel"]
    with gradebook(url, root):
        cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
        assert CourseDirectory(config=cfg).db_url == url
    # TAS_DB_URL alone still applies to the repository only (the default is unchanged)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TAS_DB_URL", url)
        mp.delenv("TAS_DB_URL_ROOT", raising=False)
        from solutions_lib.course.config import _REPO_ROOT, gradebook_url
        assert gradebook_url(root).startswith("sqlite:///")
        assert gradebook_url(_REPO_ROOT) == url


def test_scores_identical_to_sqlite(graded):
    sqlite_root, _, _ = graded["sqlite"]
    base = view(sqlite_root)
    assert {s: [n[0] for n in base[s].values()] for s in FRACTIONS} == {s: ["graded", "graded"] for s in FRACTIONS}
    assert read_results(sqlite_root, FIXTURE, "s1_solved").score("tests") == 6
    for db in ("serial", "parallel"):
        root, url, _ = graded[db]
        with gradebook(url, root):
            assert view(root) == base, db


def test_no_lost_or_doubled_rows(graded):
    _, sqlite_url, _ = graded["sqlite"]
    expected = row_counts(sqlite_url)
    assert set(expected) == set(CLASS)
    for s in FRACTIONS:  # 2 notebooks, 4 grade cells (3 test cells and a written answer)
        assert expected[s] == (1, 2, 4), (s, expected[s])
    for db in ("serial", "parallel"):
        root, url, runs = graded[db]
        assert row_counts(url) == expected, db
    runs = graded["parallel"][2]
    assert {r.student: r.status for r in runs} == {s: ("failed" if s in BAD else "ok") for s in CLASS}
    assert all(r.attempts == 1 for r in runs), [(r.student, r.notes) for r in runs]


def test_feedback_export_and_report_identical(graded):
    outs = {}
    for db in ("sqlite", "parallel"):
        root, url, _ = graded[db]
        with gradebook(url, root) if db != "sqlite" else _nothing():
            p = nbgrader(root, "generate_feedback", FIXTURE, "--force")
            assert "Traceback" not in p.stdout + p.stderr or p.returncode in (0, 1), p.stdout + p.stderr
            p = nbgrader(root, "export")
            assert p.returncode == 0, p.stdout + p.stderr
            write_report(root)
        outs[db] = root
    a, b = outs["sqlite"], outs["parallel"]
    for s in FRACTIONS:
        for nb in ("exercises.html", "theory.html"):
            assert (b / "feedback" / s / FIXTURE / nb).is_file(), (s, nb)
    assert sorted(p.relative_to(a) for p in (a / "feedback").rglob("*.html")) == \
        sorted(p.relative_to(b) for p in (b / "feedback").rglob("*.html"))
    assert csv_rows(a / "grades.csv") == csv_rows(b / "grades.csv")
    for name in ("grades_by_question.csv", "grades_by_student.csv", "flags.csv"):
        assert csv_rows(a / name) == csv_rows(b / name), name


@contextmanager
def _nothing():
    yield
