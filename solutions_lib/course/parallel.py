"""Autograde a class in parallel: one stock `nbgrader autograde` process per student, N at a time.

`python -m solutions_lib autograde A --workers N` runs, for every student folder
`<root>/submitted/<S>/A`, the stock command

    nbgrader autograde A --student S --force

as a subprocess in the course root, so nbgrader reads the course's `nbgrader_config.py` exactly
as when an instructor types the command (same gradebook, same cell timeout, same sandbox).
Each process grades one student; one whose kernel dies, times out or whose notebook cannot be
read fails alone (status `failed`, with the tail of its log) and the others go on.

How the shared gradebook stays consistent (SQLite by default, one file, N writers)
---------------------------------------------------------------------------------------
What nbgrader 0.9.6 `autograde --student S` does to the database (read from its source):

- `Gradebook(url)` runs `create_all` and, only when the database has no tables yet, stamps the
  alembic version (a `alembic heads` subprocess). There is no per-command migration; a
  fresh database created by N processes at once would race on `CREATE TABLE`.
- `init_assignment` opens and closes five short sessions: create/update the student row, find
  the assignment (it must exist: `generate_assignment` creates the assignment, notebook and cell
  rows, and the course rows `training-at-scale` and `default_course`), create/update the
  submission (its notebook, grade and comment rows), find the notebooks. Each commits at once.
- The sanitize pass (OverwriteCells) only reads; the kernel then runs with **no** gradebook
  session open; SaveAutoGrades afterwards commits once per graded cell (BEGIN, UPDATE,
  COMMIT: milliseconds). No transaction stays open while student code runs.
- Python's sqlite3 opens a transaction only before a write, so a write transaction starts
  with its write: SQLite's busy handler (pysqlite's default `timeout`: 5 s) then waits for
  the lock instead of failing, and the read-then-upgrade deadlock (SQLITE_BUSY at once,
  no waiting) does not arise.

Every row a student's process writes is that student's own, so the only shared rows are the
course, assignment and student rows. Hence:

1. Serially, before the parallel phase (`prepare`): open the gradebook once (creates the
   database and stamps alembic if needed, and the two course rows), check that the
   assignment is in it (a clear error otherwise: run `nbgrader generate_assignment`), and
   create every student's row. No two processes then ever insert the same row, and none
   creates tables.
2. In parallel: the stock command per student, with one flag added when the gradebook is
   SQLite: `--CourseDirectory.db_url=<the course's own URL>?timeout=60` (the URL is read from
   the course's nbgrader_config.py, so it is the same file; SQLAlchemy's pysqlite dialect
   turns `timeout` into sqlite3's busy timeout). pysqlite's default, 5 s, is what a writer
   waits for the lock before "database is locked". Measured on this 2-core machine with
   nbgrader's own write path (update_or_create_submission, then one commit per grade) in a
   tight loop: 16 processes, no error; 32 processes, 19 lock errors in 15 s with 5 s and none
   with 60 s. Real autograde writes far less often (the kernel runs between writes): 12
   processes grading 24 students gave no lock error even with 5 s. PostgreSQL
   (`$TAS_DB_URL`) is left untouched, and so is the course's `gradebook_url` (the Formgrader
   and every other tool keep the plain URL).
3. Belt and braces: a run that still fails with `database is locked` in its log (nbgrader
   logs the traceback, then "There was an error accessing the nbgrader database") is re-run,
   up to `lock_retries` times, after a short random pause; `autograde --force` of one
   student is idempotent, and the retry is reported (`attempts`).

Kernel processes: jupyter_client starts each kernel in its own session; when a student's
run times out (`timeout`), its nbgrader process group is killed and the kernel follows
(ipykernel's parent poller; in the sandbox, bwrap's --die-with-parent).
"""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import nbgrader_cmd
from .grader import ensure_tools_on_path

LOCK_MARKERS = ("database is locked",)
#: sqlite3's busy timeout for the parallel runs (pysqlite's default is 5 s).
SQLITE_BUSY_TIMEOUT_S = 60


@dataclass
class StudentRun:
    student: str
    status: str = "pending"       # "ok", "failed" (non-zero exit) or "timeout"
                                  # (--claim: another grading host claimed this student)
    seconds: float = 0.0          # wall time of this student's runs, retries included
    returncode: int | None = None
    attempts: int = 0
    log: str = ""                 # nbgrader's output (stdout and stderr) of the last attempt
    started: float = 0.0          # time.time() at the start of the first attempt
    finished: float = 0.0         # time.time() at the end of the last one
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def reason(self) -> str:
        """The last 'SomeError: message' line of the log (why the run failed), or ''."""
        for line in reversed(self.log.splitlines()):
            m = re.match(r"\s*([\w.]*(?:Error|Exception|Exit)\b.*)", line)
            if m:
                return m.group(1).strip()[:200]
        return ""

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.rstrip().splitlines()[-lines:])


class GradingSetupError(ValueError):
    """The class cannot be graded as asked (no such assignment, no submissions...)."""


def nbgrader_executable() -> str:
    """The stock `nbgrader` script (patched by the tests to a fake one)."""
    return nbgrader_cmd.stock_executable()


def course_settings(root: Path) -> tuple[str, str]:
    """(db_url, course_id) as stock nbgrader reads them from `<root>/nbgrader_config.py`."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    cd = CourseDirectory(config=cfg)
    return cd.db_url, cd.course_id


def busy_timeout_url(db_url: str, seconds: float = SQLITE_BUSY_TIMEOUT_S) -> str | None:
    """`db_url` with `?timeout=seconds` when it is a SQLite URL without one; else None."""
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    if url.get_backend_name() != "sqlite" or "timeout" in url.query:
        return None
    return url.update_query_dict({"timeout": f"{seconds:g}"}).render_as_string(hide_password=False)


def thread_env(workers: int) -> dict[str, str]:
    """The environment of each nbgrader run: the CPUs shared out between the `workers` kernels
    (OMP_NUM_THREADS/MKL_NUM_THREADS = cpus // workers, at least 1; torch and numpy read them
    at start, and the sandbox passes them in), unless the caller set them already."""
    env = dict(os.environ)
    share = str(max(1, (os.cpu_count() or 1) // max(1, workers)))
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(k, share)
    return env


def find_students(root: Path, assignment: str) -> list[str]:
    """Students with a folder `submitted/<student>/<assignment>`, sorted."""
    sub = Path(root) / "submitted"
    if not sub.is_dir():
        return []
    return sorted(p.name for p in sub.iterdir() if (p / assignment).is_dir())


def prepare(root: Path, assignment: str, students: list[str], notebooks: list[str] | None = None) -> str:
    """The serial phase: gradebook, course rows and student rows exist; the assignment too;
    the trusted run of each notebook (of `notebooks`, names without .ipynb, default all) is
    cached. Returns the course's gradebook URL."""
    from nbgrader.api import Gradebook, InvalidEntry, MissingEntry

    db_url, course_id = course_settings(root)
    with Gradebook(db_url) as gb:   # the "default_course" row nbgrader's preprocessors use
        pass
    with Gradebook(db_url, course_id) as gb:
        try:
            a = gb.find_assignment(assignment)
        except MissingEntry:
            known = sorted(x.name for x in gb.assignments)
            raise GradingSetupError(
                f"assignment {assignment!r} is not in the gradebook of {root} "
                f"(known: {', '.join(known) or 'none'}); run `nbgrader generate_assignment {assignment}` "
                "in the course root first") from None
        if not a.notebooks:
            raise GradingSetupError(f"assignment {assignment!r} has no notebooks in the gradebook; "
                                    f"run `nbgrader generate_assignment {assignment} --force`")
        for s in students:
            try:
                gb.find_student(s)
            except MissingEntry:
                try:
                    gb.add_student(s)
                except InvalidEntry:  # another grading host created it meanwhile (shared gradebook)
                    gb.find_student(s)
    # the trusted run of each notebook (integrity.py), once, before the workers need it
    from .config import CELL_TIMEOUT_S
    from .trusted import TrustedRunError, trusted_records
    for src in sorted((Path(root) / "source" / assignment).glob("*.ipynb")):
        if notebooks is not None and src.stem not in notebooks:
            continue
        try:
            trusted_records(src, timeout=CELL_TIMEOUT_S)
        except TrustedRunError as e:
            raise GradingSetupError(str(e)) from None
    return db_url


def _run_once(root: Path, assignment: str, student: str, timeout: float | None,
              extra: tuple[str, ...] = (), env: dict[str, str] | None = None,
              on_line: Callable[[str], None] | None = None,
              launcher: list[str] | None = None) -> tuple[int | None, str, bool]:
    """One stock `nbgrader autograde A --student S --force [extra]`: (returncode, log, timed_out).
    `on_line`, when given, sees each line of nbgrader's log as it is written (live progress);
    `launcher` replaces the `nbgrader` script (e.g. nbgrader_cmd.command(): the same nbgrader)."""
    cmd = [*(launcher or [nbgrader_executable()]), "autograde", assignment, "--student", student, "--force", *extra]
    # Its own session: a kill reaches nbgrader and whatever it started but the kernels, which
    # jupyter_client starts in sessions of their own and which die with their parent.
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True, env=env)
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        if on_line is None:
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out, False
        lines: list[str] = []
        timer = threading.Timer(timeout, _killpg, (proc, signal.SIGKILL)) if timeout else None
        if timer:
            timer.start()
        try:
            for line in proc.stdout:
                lines.append(line)
                on_line(line)
            proc.wait()
        finally:
            if timer:
                timer.cancel()
        timed_out = bool(timer) and proc.returncode == -signal.SIGKILL
        return (None if timed_out else proc.returncode), "".join(lines), timed_out
    except subprocess.TimeoutExpired:
        return None, _stop(proc), True
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


def _killpg(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _stop_all() -> None:
    """Stop every run in flight: SIGTERM to all at once, SIGKILL to those still there after 10 s
    (or at once on a second Ctrl-C)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _killpg(proc, signal.SIGTERM)
    try:
        deadline = time.monotonic() + 10
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _killpg(proc, signal.SIGKILL)
    except KeyboardInterrupt:
        for proc in running:
            _killpg(proc, signal.SIGKILL)
        raise


def _stop(proc: subprocess.Popen) -> str:
    """SIGTERM, then SIGKILL, to the process group of `proc`; what it wrote meanwhile."""
    out = ""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
        _killpg(proc, sig)
        try:
            out, _ = proc.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            pass
    return out or ""


def grade_student(root: Path, assignment: str, student: str, timeout: float | None = None,
                  lock_retries: int = 2, extra: tuple[str, ...] = (),
                  env: dict[str, str] | None = None,
                  on_line: Callable[[str], None] | None = None,
                  launcher: list[str] | None = None) -> StudentRun:
    run = StudentRun(student, started=time.time())
    t0 = time.perf_counter()
    while True:
        run.attempts += 1
        rc, log, timed_out = _run_once(root, assignment, student, timeout, extra, env,
                                        **({'on_line': on_line} if on_line else {}),
                                        **({'launcher': launcher} if launcher else {}))
        run.returncode, run.log = rc, log
        if timed_out:
            run.status = "timeout"
            run.notes.append(f"killed after {timeout:g} s (--timeout-per-student)")
            break
        if rc == 0:
            run.status = "ok"
            break
        run.status = "failed"
        if any(m in log for m in LOCK_MARKERS) and run.attempts <= lock_retries:
            run.notes.append(f"attempt {run.attempts}: gradebook locked, graded again")
            time.sleep(random.uniform(0.5, 2.0) * run.attempts)
            continue
        break
    run.seconds = time.perf_counter() - t0
    run.finished = time.time()
    return run


def autograde_class(root, assignment: str, students: list[str] | None = None, workers: int | None = None,
                    timeout: float | None = None, lock_retries: int = 2,
                    progress: Callable[[StudentRun, int, int], None] | None = None) -> list[StudentRun]:
    """Autograde `assignment` for `students` (default: every folder under submitted/) with
    `workers` stock nbgrader processes at a time (default: os.cpu_count()). Returns one
    StudentRun per student, in the order of `students`; raises GradingSetupError when the
    course, the assignment or a student's submission is not there. One host; for several,
    `python -m solutions_lib grade` (course/engine.py, docs/engine.md)."""
    ensure_tools_on_path()
    root = Path(root).resolve()
    if not (root / "nbgrader_config.py").is_file():
        raise GradingSetupError(f"no nbgrader_config.py in {root}: not a course root")
    if not (root / "source" / assignment).is_dir():
        raise GradingSetupError(f"no assignment {assignment!r} in {root / 'source'}")
    if students:
        students = list(dict.fromkeys(students))  # each student once: one process per student
        missing = [s for s in students if not (root / "submitted" / s / assignment).is_dir()]
        if missing:
            raise GradingSetupError(f"no submission of {assignment!r} for: {', '.join(missing)} "
                                    f"(expected {root / 'submitted' / '<student>' / assignment})")
    else:
        students = find_students(root, assignment)
        if not students:
            raise GradingSetupError(f"no submissions of {assignment!r} under {root / 'submitted'}")
    mode = os.environ.get("TAS_SANDBOX", "on")
    if mode != "off":
        from .config import refusal
        from .sandbox import sandbox_available
        ok, why = sandbox_available()
        if not ok:
            raise GradingSetupError(refusal(mode, why))
    workers = max(1, int(workers or os.cpu_count() or 1))
    db_url = prepare(root, assignment, students)
    longer = busy_timeout_url(db_url)
    extra = (f"--CourseDirectory.db_url={longer}",) if longer else ()
    job = grade_student
    env = thread_env(workers)
    runs: dict[str, StudentRun] = {}
    pool = ThreadPoolExecutor(max_workers=min(workers, len(students)))
    try:
        futures = {pool.submit(job, root, assignment, s, timeout, lock_retries, extra, env): s
                   for s in students}
        for fut in as_completed(futures):
            s = futures[fut]
            try:
                run = fut.result()
            except Exception as e:  # an error of ours (cannot start nbgrader...), not the student's
                run = StudentRun(s, "failed", log=f"{type(e).__name__}: {e}", attempts=1)
            runs[s] = run
            if progress:
                progress(run, len(runs), len(students))
    except BaseException:  # Ctrl-C: the runs are in sessions of their own, the terminal's SIGINT missed them
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_all()
        raise
    pool.shutdown()
    return [runs[s] for s in students]


def format_runs(runs: list[StudentRun], wall: float) -> str:
    rows = [("student", "status", "seconds", "attempts")]
    rows += [(r.student, r.status, f"{r.seconds:.1f}", str(r.attempts)) for r in runs]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    total = sum(r.seconds for r in runs)
    speedup = total / wall if wall > 0 else float("nan")
    lines.append("")
    lines.append(f"wall {wall:.1f} s; sum of per-student times {total:.1f} s; speed-up (sum / wall) {speedup:.2f}x")
    if len(runs) > 1:
        lines.append("(per-student times grow when workers share cores: compare the wall time with --workers 1)")
    failed = [r for r in runs if not r.ok]
    if failed:
        lines.append(f"\n{len(failed)} of {len(runs)} students not graded:")
        for r in failed:
            lines.append(f"--- {r.student}: {r.status} (exit {r.returncode}) " + "; ".join(r.notes + [r.reason]))
            lines.append(r.log_tail())
    return "\n".join(lines)


def main(assignment: str, students: list[str] | None = None, workers: int | None = None,
         root=None, timeout: float | None = None) -> int:
    """The CLI: grade, print the table; 0 when every student was graded, 1 when not, 2 on a setup error."""
    from .paths import course_root

    try:
        root = Path(root) if root else course_root()
        n = max(1, int(workers or os.cpu_count() or 1))
        print(f"autograding {assignment} in {root} with {n} worker(s)", flush=True)

        def progress(run: StudentRun, done: int, total: int) -> None:
            print(f"  [{done}/{total}] {run.student}: {run.status} ({run.seconds:.1f} s)", flush=True)

        t0 = time.perf_counter()
        runs = autograde_class(root, assignment, students, n, timeout=timeout, progress=progress)
        wall = time.perf_counter() - t0
    except (GradingSetupError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the runs in flight were stopped; grade those students again (--student)",
              file=sys.stderr)
        return 130
    print()
    print(format_runs(runs, wall))
    return 0 if all(r.ok for r in runs) else 1
