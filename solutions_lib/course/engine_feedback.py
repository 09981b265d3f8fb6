"""Feedback for a class on the grading engine's workers: one task per student, one course root.

    python -m solutions_lib grade A --feedback [--workers N] [--scheduler tcp://HOST:PORT] [--student S ...]
    python -m solutions_lib.course.engine_feedback A [the same options, --root R]

Stock `nbgrader generate_feedback A` runs on one core on the head (about 5 h for 150 students
x 11 assignments, measured in issue 30). Here each student's feedback is one Dask task, made
by the very same stock command on a worker, from data the task carries:

- the student's `autograded/<S>/<A>/` files (the autograded notebooks the engine or
  `nbgrader autograde` wrote on the head, `timestamp.txt`, other files), and
- a snapshot of the head's gradebook (scores, comments, manual grades, late penalties and the
  source cells the feedback screen reads its hidden lines from), taken once per run and sent
  once to each worker (`Client.scatter(..., broadcast=True)`). A SQLite gradebook is copied
  with SQLite's backup API; any other (PostgreSQL) row by row into a SQLite file.

The worker makes a throw-away course with the course's own config (so the feedback
preprocessors are the course's: GetGrades, the HTML neutraliser, the hidden-test screen,
"awaiting a grader" notes), runs `nbgrader generate_feedback A --student S --force` and returns
`feedback/<S>/<A>/`'s files as bytes. The head replaces each student's `feedback/<S>/<A>/` with
them, as `--force` does; `nbgrader release_feedback A` then works unchanged. The HTML equals
what stock `generate_feedback` writes on the head for the same gradebook (`tests/test_engine.py`).

Workers pass the same preflight as for grading (same software as the head, a solved notebook
graded to full marks) before they get a student.
"""
from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import stat
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import engine_worker
from .parallel import GradingSetupError


@dataclass
class FeedbackRun:
    student: str
    status: str             # "done", "failed" (see reason), "not graded" (no autograded folder on the head)
    files: list[str] = field(default_factory=list)
    seconds: float = 0.0
    worker: str = ""
    reason: str = ""


@dataclass
class ClassFeedback:
    assignment: str
    runs: list[FeedbackRun] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    wall: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.status in ("done", "not graded") for r in self.runs)


# ----------------------------------------------------------------------------- the head

def snapshot_gradebook(db_url: str) -> bytes:
    """The gradebook at `db_url` as the bytes of a SQLite file nbgrader opens without migrating.
    SQLite: an online backup (a consistent copy while others read). Otherwise: nbgrader's tables
    and `alembic_version` copied row by row (parents before children)."""
    fd, tmp = tempfile.mkstemp(suffix=".db")
    os.close(fd)
    try:
        if db_url.startswith("sqlite:///"):
            src = sqlite3.connect(f"file:{db_url[len('sqlite:///'):]}?mode=ro", uri=True)
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)
            finally:
                dst.close()
                src.close()
        else:
            _copy_rows(db_url, "sqlite:///" + tmp)
        return Path(tmp).read_bytes()
    finally:
        os.remove(tmp)


def _copy_rows(src_url: str, dst_url: str) -> None:
    from nbgrader.api import Base
    from sqlalchemy import MetaData, Table, create_engine

    src, dst = create_engine(src_url), create_engine(dst_url)
    try:
        Base.metadata.create_all(dst)
        version = Table("alembic_version", MetaData(), autoload_with=src)
        version.create(dst)
        with src.connect() as a, dst.begin() as b:
            for table in [*Base.metadata.sorted_tables, version]:
                rows = [dict(r._mapping) for r in a.execute(table.select())]
                if rows:
                    b.execute(table.insert(), rows)
    finally:
        src.dispose()
        dst.dispose()


def _graded_files(folder: Path) -> dict[str, bytes]:
    """The regular files under an autograded folder (links and special files are never followed)."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            p = Path(dirpath) / name
            if stat.S_ISREG(os.lstat(p).st_mode):
                files[str(p.relative_to(folder))] = p.read_bytes()
    return files


def _write_feedback(root: Path, assignment: str, student: str, files: dict[str, bytes]) -> list[str]:
    """Replace `feedback/<student>/<assignment>/` with `files` (what `generate_feedback --force` does)."""
    dest = root / "feedback" / student / assignment
    if os.path.islink(dest) or dest.is_file():
        os.remove(dest)
    elif dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for rel, data in sorted(files.items()):
        path = dest / engine_worker._safe_rel(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o644)
    return sorted(files)


def feedback_class(root, assignment: str, students: list[str] | None = None, workers: int | None = None,
                   scheduler: str | None = None, wait_s: float = 120, client=None,
                   out: Callable[[str], None] = print) -> ClassFeedback:
    """Feedback of `assignment` for `students` (default: every student with an autograded folder)
    on Dask; see the module docstring. `client`: an existing distributed.Client."""
    from nbgrader.coursedir import CourseDirectory

    from .engine import Progress, _completed, _connect, head_settings, preflight_all
    from .grader import ensure_tools_on_path

    ensure_tools_on_path()
    t0 = time.perf_counter()
    root = Path(root).resolve()
    if not (root / "nbgrader_config.py").is_file():
        raise GradingSetupError(f"no nbgrader_config.py in {root}: not a course root")
    graded_root = root / "autograded"
    everyone = sorted(p.name for p in graded_root.iterdir() if (p / assignment).is_dir()) \
        if graded_root.is_dir() else []
    students = list(dict.fromkeys(students)) if students else everyone
    if not students:
        raise GradingSetupError(f"nothing autograded for {assignment!r} under {graded_root}: grade first")
    head_cfg, settings = head_settings(root)
    cd = CourseDirectory(config=head_cfg)
    result = ClassFeedback(assignment)
    tasks = []
    for s in students:
        folder = graded_root / s / assignment
        files = _graded_files(folder) if folder.is_dir() and not folder.is_symlink() else {}
        if not any(name.endswith(".ipynb") for name in files):
            result.runs.append(FeedbackRun(s, "not graded", reason=f"no autograded notebook in autograded/{s}/{assignment}"))
            continue
        tasks.append({**settings, "assignment": assignment, "student": s, "course_id": cd.course_id,
                      "files": files, "task_id": f"{s}/feedback",
                      "timeout_s": max(600, 10 * settings["cell_timeout"])})
    if tasks:
        snapshot = snapshot_gradebook(cd.db_url)
        own = client is None
        cluster = None
        if own:
            client, cluster = _connect(max(1, int(workers or os.cpu_count() or 1)), scheduler, wait_s)
        try:
            from distributed import wait
            spec = {"settings": settings, "versions": engine_worker.versions()}
            good, bad = preflight_all(client, spec, out)
            result.accepted, result.refused = good, bad
            if not good:
                raise GradingSetupError("no worker passed the preflight (reasons above): no feedback was made")
            db = client.scatter(snapshot, broadcast=True, workers=good)
            token = uuid.uuid4().hex[:8]
            futs = {client.submit(feedback_task, t, db, key=f"tas-feedback-{token}-{i}", workers=good,
                                  allow_other_workers=False, retries=1, pure=False): t for i, t in enumerate(tasks)}
            bar = Progress(len(futs), f"feedback for {assignment} on {len(good)} worker(s)")
            try:
                for f in _completed(list(futs), wait):
                    t = futs[f]
                    run = FeedbackRun(t["student"], "failed")
                    if f.status == "finished":
                        res = f.result()
                        run.seconds, run.worker, run.reason = res["seconds"], res["worker"], res["reason"]
                        if res["status"] == "done":
                            run.files = _write_feedback(root, assignment, t["student"], res["files"])
                            run.status = "done"
                    else:
                        try:
                            e = f.exception()
                        except BaseException as x:  # noqa: BLE001  (a cancelled future raises here)
                            e = x
                        run.reason = f"the cluster could not make it: {type(e).__name__}: {e}"[:500]
                    result.runs.append(run)
                    bar.step(f"{run.student}: {run.status}")
            finally:
                bar.close()
        finally:
            if own:
                client.close()
                if cluster is not None:
                    cluster.close()
    order = {s: i for i, s in enumerate(students)}
    result.runs.sort(key=lambda r: order[r.student])
    result.wall = time.perf_counter() - t0
    return result


def format_feedback(r: ClassFeedback) -> str:
    lines = [f"{x.student}: {x.status}" + (f" ({', '.join(x.files)})" if x.files else "")
             + (f": {x.reason}" if x.reason and x.status != "done" else "") for x in r.runs]
    done = sum(1 for x in r.runs if x.status == "done")
    lines.append(f"\nfeedback for {done} student(s) of {r.assignment} in {r.wall:.1f} s on {len(r.accepted)} worker(s)"
                 + (f"; {len(r.refused)} worker(s) refused" if r.refused else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the worker

def feedback_task(task: dict, gradebook: bytes) -> dict:
    """One student's feedback on this worker (see the module docstring); never raises for the
    student's doing: a failure comes back with status "failed" and the reason."""
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="feedback-", dir=engine_worker.base_dir()))
    a, s = task["assignment"], task["student"]
    try:
        course = work / "course"
        course.mkdir()
        (course / "nbgrader_config.py").write_text(
            engine_worker._CONFIG.format(timeout=int(task["cell_timeout"]), term="")
            + f"c.CourseDirectory.course_id = {task['course_id']!r}\n")
        (course / "gradebook.db").write_bytes(gradebook)
        graded = course / "autograded" / s / a
        graded.mkdir(parents=True)
        for rel, data in task["files"].items():
            path = graded / engine_worker._safe_rel(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        rc, log = engine_worker._run(["generate_feedback", a, "--student", s, "--force"], course,
                                     engine_worker._env(task), float(task.get("timeout_s") or 600))
        made = course / "feedback" / s / a
        res = {"student": s, "worker": f"{socket.gethostname()}:{os.getpid()}", "log_tail": engine_worker._tail(log),
               "files": {}, "reason": "", "status": "failed"}
        if rc == 0 and made.is_dir() and any(made.glob("*.html")):
            res.update(status="done", files=_graded_files(made))
        else:
            res["reason"] = ("the task's time limit was reached" if rc is None
                             else engine_worker._reason(log).replace("autograde", "generate_feedback"))
        res["seconds"] = time.perf_counter() - t0
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    import argparse
    import sys

    from .paths import course_root

    p = argparse.ArgumentParser(prog="python -m solutions_lib.course.engine_feedback",
                                description="Make a graded class's feedback HTML on Dask: one task per student.")
    from .engine import add_class_arguments
    add_class_arguments(p)
    a = p.parse_args(argv)
    try:
        root = Path(a.root) if a.root else course_root()
        fb = feedback_class(root, a.assignment, a.student, a.workers or (1 if a.scheduler else None), a.scheduler)
    except (GradingSetupError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_feedback(fb))
    return 0 if fb.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
