"""Grade a class on Dask distributed with stateless workers; one course root, one gradebook.

    python -m solutions_lib.course.engine A [--workers N] [--scheduler tcp://HOST:PORT]
                                            [--student S ...] [--root R] [--timeout SECONDS]
    (the feedback HTML of a graded class on the same workers: engine_feedback.py)

One task is ONE student-notebook, carried as data (engine_worker.py): the submitted
notebook's bytes, the assignment's source notebook, the student's other files and the course
settings read here from the course's `nbgrader_config.py`. A worker grades it with stock
`nbgrader autograde` in a throw-away course and returns the autograded notebook, the scores,
the log tail. This process (the head) then writes `<root>/autograded/<S>/<A>/<nb>.ipynb`
and records the scores in the course's ONE gradebook the way `nbgrader autograde` does
(SaveAutoGrades' rule on the scores it computed on the worker; AssignLatePenalties of this
course's config run here), so the Formgrader, `generate_feedback`, `export` and the report see
the whole class on one host, whichever machine graded whom.

- Default: an embedded `distributed.LocalCluster` of `--workers` processes (one thread each).
  `--scheduler URL`: the workers of an existing cluster (`dask worker`, dask-jobqueue on Slurm,
  dask-kubernetes); `--workers N` then waits for N of them (docs/engine.md).
- Preflight (engine_worker.preflight) on every worker before any student: same software as
  here, and a solved notebook whose test imports the course package graded to full marks.
  A worker that fails gets no task; its reason is printed in a box on stderr.
- A worker that dies mid-task loses only that task: the scheduler gives it to another worker
  (Dask's `allowed-failures`), and a task that raised is retried once (`retries=1`). Each
  result is recorded once (a second result for one student-notebook is an error, not a write).
- One bad notebook fails only itself (engine_intake.py: empty, not JSON, another
  assignment's, two renamed copies), with the reason; a renamed `exercises (1).ipynb` is
  graded as `exercises.ipynb` and filed under that name in submitted/ (the original stays).

Exit status: 0 when every notebook handed in was graded, 1 when not, 2 on a setup error.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import engine_worker
from .engine_intake import Catalogue, Plan, plan_submission
from .parallel import GradingSetupError, find_students

#: A worker's preflight may take this long (a first trusted run and nbgrader's start included).
PREFLIGHT_TIMEOUT_S = 900


@dataclass
class NotebookRun:
    """One student-notebook's outcome on the head."""
    student: str
    notebook: str
    status: str                  # "graded", "failed", "timeout", "missing" (not handed in)
    score: float = 0.0           # auto-graded points recorded (graded only; written answers not counted)
    max_score: float = 0.0
    seconds: float = 0.0         # on the worker
    worker: str = ""
    reason: str = ""
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("graded", "missing")


@dataclass
class ClassRun:
    assignment: str
    runs: list[NotebookRun] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)     # worker address -> why
    accepted: list[str] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)  # student -> intake notes
    wall: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)


# ----------------------------------------------------------------------------- the head's course

def head_settings(root: Path) -> tuple[object, dict]:
    """(traitlets Config of `<root>/nbgrader_config.py`, the settings every task carries)."""
    from traitlets.config.loader import PyFileConfigLoader

    from .config import CELL_TIMEOUT_S, term_key
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    timeout = cfg.Execute.timeout if "timeout" in cfg.Execute else CELL_TIMEOUT_S
    sandbox = os.environ.get("TAS_SANDBOX", "on")
    grader_side = os.environ.get("TAS_GRADER_SIDE", "on")
    if sandbox not in ("off", "on", "required") or grader_side not in ("off", "on"):
        raise GradingSetupError(f"TAS_SANDBOX={sandbox!r} / TAS_GRADER_SIDE={grader_side!r}: not a known setting")
    return cfg, {"cell_timeout": int(timeout), "term_key": term_key(str(root)), "sandbox": sandbox,
                 "grader_side": grader_side}


def _source_files(root: Path, assignment: str, ignore: list[str]) -> dict[str, bytes]:
    """The assignment's non-notebook source files (stock autograde copies them next to the notebook)."""
    from .engine_intake import other_files
    return other_files(root / "source" / assignment, ignore, 0, [])


def prepare_gradebook(db_url: str, course_id: str, assignment: str, students: list[str]) -> dict[str, set[str]]:
    """The assignment is in the gradebook (else a clear error) and every student has a row.
    Returns {notebook: grade ids} of the assignment as the gradebook holds it."""
    from nbgrader.api import Gradebook, InvalidEntry, MissingEntry

    with Gradebook(db_url) as gb:   # the "default_course" row nbgrader's preprocessors use
        pass
    with Gradebook(db_url, course_id) as gb:
        try:
            a = gb.find_assignment(assignment)
        except MissingEntry:
            raise GradingSetupError(f"assignment {assignment!r} is not in the gradebook; run "
                                    f"`nbgrader generate_assignment {assignment}` in the course root first") from None
        if not a.notebooks:
            raise GradingSetupError(f"assignment {assignment!r} has no notebooks in the gradebook; "
                                    f"run `nbgrader generate_assignment {assignment} --force`")
        cells = {nb.name: {c.name for c in nb.grade_cells} for nb in a.notebooks}
        for s in students:
            try:
                gb.find_student(s)
            except MissingEntry:
                try:
                    gb.add_student(s)
                except InvalidEntry:
                    gb.find_student(s)
    return cells


def start_student(gb, root: Path, assignment: str, plan: Plan, source_files: dict[str, bytes]) -> None:
    """What `nbgrader autograde A --student S --force` does before any notebook runs: a fresh
    autograded folder with the submission's and the source's other files, the submission row
    with its timestamp, zero for each notebook not handed in. A renamed notebook is filed in
    submitted/ under its course name (the tools that read submitted/ then see it)."""
    from nbgrader.utils import parse_utc

    s = plan.student
    dest = root / "autograded" / s / assignment
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for rel, data in {**plan.files, **source_files}.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    if plan.timestamp:
        (dest / "timestamp.txt").write_text(plan.timestamp)
    for nb, (name, data) in plan.graded.items():
        canonical = plan.folder / f"{nb}.ipynb"
        if name != canonical.name and not os.path.lexists(canonical):
            try:
                canonical.write_bytes(data)
            except OSError as e:   # a read-only submitted/ (collected by another user): graded all the same
                plan.notes.append(f"could not file {name!r} as {canonical.name} in submitted/ ({e.strerror})")
    stamp = None
    if plan.timestamp:
        try:
            stamp = parse_utc(plan.timestamp)
        except ValueError:
            plan.notes.append(f"timestamp.txt unreadable ({plan.timestamp[:40]!r}): graded as not late")
    import warnings
    with warnings.catch_warnings():   # nbgrader's own autoflush notice (as in stock autograde): not ours to fix
        warnings.filterwarnings("ignore", message=".*not in session.*")
        sub = gb.update_or_create_submission(assignment, s, **({"timestamp": stamp} if stamp else {}))
    for nb in plan.missing:
        for grade in gb.find_submission_notebook(nb, assignment, s).grades:
            grade.auto_score = 0
            grade.needs_manual_grade = False
    gb.db.commit()
    del sub


def record(gb, head_cfg, db_url: str, root: Path, assignment: str, result: dict, cells: set[str]) -> NotebookRun:
    """Write one worker result into the course: the autograded notebook, then the scores as
    SaveAutoGrades records them (auto score; needs a person when a person graded it before or
    there is no auto score), the comments, and this course's late penalty."""
    import nbformat
    from nbgrader.preprocessors import AssignLatePenalties

    s, nb = result["student"], result["notebook"]
    run = NotebookRun(s, nb, result["status"], seconds=result.get("seconds", 0.0), worker=result.get("worker", ""),
                      reason=result.get("reason", ""), log_tail=result.get("log_tail", ""))
    dest = root / "autograded" / s / assignment / f"{nb}.ipynb"
    if run.status == "graded" and set(result["grades"]) != cells:
        run.status = "failed"
        run.reason = (f"the worker graded cells {sorted(result['grades'])} but the gradebook expects {sorted(cells)}: "
                      f"run `nbgrader generate_assignment {assignment} --force` after changing source/")
    if run.status != "graded":
        if os.path.lexists(dest):   # a stale copy must not be read as this run's (nbgrader does the same)
            os.remove(dest)
        return run
    dest.write_bytes(result["autograded"])
    sub = gb.find_submission_notebook(nb, assignment, s)
    for grade in sub.grades:
        w = result["grades"][grade.name]
        grade.auto_score = w["auto_score"]
        grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
        if w["cell_type"] == "code":   # the auto-graded points; written answers wait for a person
            run.score += w["auto_score"] or 0.0
            run.max_score += w["max_score"]
    for comment in sub.comments:
        if comment.name in result["comments"]:
            comment.auto_comment = result["comments"][comment.name]
    gb.db.commit()
    node = nbformat.reads(result["autograded"].decode("utf-8"), as_version=4)
    AssignLatePenalties(config=head_cfg).preprocess(node, {"nbgrader": {
        "notebook": nb, "assignment": assignment, "student": s, "db_url": db_url}})
    return run


# ----------------------------------------------------------------------------- the cluster

def _connect(workers: int, scheduler: str | None, wait_s: float):
    """(client, cluster or None): the existing cluster at `scheduler` (waiting for `workers` of
    its workers), else a LocalCluster of `workers` processes."""
    import logging

    from distributed import Client, LocalCluster
    if scheduler:
        client = Client(scheduler, timeout=60)
        try:
            client.wait_for_workers(workers, timeout=wait_s)
        except TimeoutError:
            n = len(client.scheduler_info()["workers"])
            if n == 0:
                client.close()
                raise GradingSetupError(f"no worker joined {scheduler} within {wait_s:g} s") from None
            print(f"warning: {n} of the {workers} workers asked for joined {scheduler}; grading with those",
                  file=sys.stderr)
        return client, None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                           silence_logs=logging.ERROR)
    return Client(cluster), cluster


def preflight_all(client, spec: dict, out: Callable[[str], None] = print) -> tuple[list[str], dict[str, str]]:
    """(workers that passed, {worker: why not}) for every worker connected now; refusals are
    printed loudly on stderr."""
    from distributed import wait

    addrs = sorted(client.scheduler_info()["workers"])
    token = uuid.uuid4().hex[:8]
    futs = {a: client.submit(engine_worker.preflight, spec, key=f"tas-preflight-{token}-{i}", workers=[a],
                             allow_other_workers=False, pure=False) for i, a in enumerate(addrs)}
    wait(list(futs.values()), timeout=PREFLIGHT_TIMEOUT_S, return_when="ALL_COMPLETED")
    good, bad = [], {}
    for a, f in futs.items():
        if f.status == "finished":
            res = f.result()
            if res["ok"]:
                good.append(a)
                continue
            bad[a] = f"{res['host']} ({res['python']}): {res['reason']}"
        elif f.status == "error":
            bad[a] = f"preflight raised {type(f.exception()).__name__}: {f.exception()}"
        else:
            f.cancel()
            bad[a] = f"preflight did not finish within {PREFLIGHT_TIMEOUT_S} s"
    for a, why in bad.items():
        bar = "!" * 78
        print(f"\n{bar}\nWORKER REFUSED {a}: it gets no student.\n{why}\n{bar}", file=sys.stderr, flush=True)
    return good, bad


class Progress:
    """One line on the head: tqdm when installed, else a counter rewritten in place."""

    def __init__(self, total: int, label: str):
        self.total, self.done, self.label = total, 0, label
        self.tty = sys.stderr.isatty()
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=label, unit="nb", file=sys.stderr)
        except ImportError:
            self.bar = None

    def step(self, text: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(text[:40])
            self.bar.update(1)
            return
        line = f"{self.label}: [{self.done}/{self.total}] {text}"
        print(("\r" + line[:100].ljust(100)) if self.tty else line, end="" if self.tty else "\n",
              file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.tty:
            print(file=sys.stderr)


def grade_class(root, assignment: str, students: list[str] | None = None, workers: int | None = None,
                scheduler: str | None = None, timeout_s: float | None = None, wait_s: float = 120,
                client=None, out: Callable[[str], None] = print) -> ClassRun:
    """Grade `assignment` for `students` (default: every folder under submitted/) on Dask; see
    the module docstring. `client`: an existing distributed.Client (tests, notebooks)."""
    from nbgrader.api import Gradebook
    from nbgrader.coursedir import CourseDirectory

    from .limits import MAX_SUBMISSION_FILE_BYTES
    from .grader import ensure_tools_on_path

    ensure_tools_on_path()
    t0 = time.perf_counter()
    root = Path(root).resolve()
    if not (root / "nbgrader_config.py").is_file():
        raise GradingSetupError(f"no nbgrader_config.py in {root}: not a course root")
    if not (root / "source" / assignment).is_dir():
        raise GradingSetupError(f"no assignment {assignment!r} in {root / 'source'}")
    if students:
        students = list(dict.fromkeys(students))
        missing = [s for s in students if not (root / "submitted" / s / assignment).is_dir()]
        if missing:
            raise GradingSetupError(f"no submission of {assignment!r} for: {', '.join(missing)}")
    else:
        students = find_students(root, assignment)
        if not students:
            raise GradingSetupError(f"no submissions of {assignment!r} under {root / 'submitted'}")
    head_cfg, settings = head_settings(root)
    cd = CourseDirectory(config=head_cfg)
    db_url, course_id, ignore = cd.db_url, cd.course_id, list(cd.ignore)
    cells = prepare_gradebook(db_url, course_id, assignment, students)
    sources = {nb: (root / "source" / assignment / f"{nb}.ipynb").read_bytes() for nb in cells
               if (root / "source" / assignment / f"{nb}.ipynb").is_file()}
    if set(sources) != set(cells):
        raise GradingSetupError(f"source/{assignment} lacks {sorted(set(cells) - set(sources))}, which the "
                                "gradebook lists: run `nbgrader generate_assignment --force` again")
    extra_src = _source_files(root, assignment, ignore)
    catalogue = Catalogue(root)
    result = ClassRun(assignment)
    plans = {s: plan_submission(root / "submitted" / s / assignment, assignment, sorted(cells), catalogue,
                                ignore, MAX_SUBMISSION_FILE_BYTES) for s in students}
    with Gradebook(db_url, course_id) as gb:
        for s, plan in plans.items():
            start_student(gb, root, assignment, plan, extra_src)
            if plan.notes:
                result.notes[s] = plan.notes
            for nb, why in plan.failed.items():
                result.runs.append(record(gb, head_cfg, db_url, root, assignment,
                                          {"student": s, "notebook": nb, "status": "failed", "reason": why},
                                          cells[nb]))
            result.runs += [NotebookRun(s, nb, "missing", reason="not in the submission") for nb in plan.missing]
    tasks = []
    for s, plan in plans.items():
        for nb, (_name, data) in sorted(plan.graded.items()):
            tasks.append({**settings, "assignment": assignment, "notebook": nb, "student": s, "submission": data,
                          "source": sources[nb], "source_files": extra_src, "files": plan.files,
                          "timestamp": plan.timestamp, "task_id": f"{s}/{nb}",
                          "timeout_s": timeout_s or max(900, 30 * settings["cell_timeout"]),
                          "threads": None})
    if tasks:
        n = max(1, int(workers or os.cpu_count() or 1))
        own = client is None
        cluster = None
        if own:
            client, cluster = _connect(n, scheduler, wait_s)
        try:
            _run_tasks(client, tasks, settings, result, head_cfg, db_url, course_id, root, assignment, cells,
                       local=cluster is not None, out=out)
        finally:
            if own:
                client.close()
                if cluster is not None:
                    cluster.close()
    order = {s: i for i, s in enumerate(students)}
    result.runs.sort(key=lambda r: (order[r.student], r.notebook))
    result.wall = time.perf_counter() - t0
    return result


def _completed(futures: list, wait, poll_s: float = 5.0):
    """Each future once, as it finishes. `distributed.wait` with a timeout, not `as_completed`:
    the futures' own states are looked at every `poll_s`, so a missed notification (seen when a
    second Client in this process closed while a worker died) cannot stall the head."""
    pending = set(futures)
    while pending:
        try:
            done, _ = wait(list(pending), timeout=poll_s, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        done |= {f for f in pending if f.status in ("finished", "error", "cancelled")}
        for f in sorted(done, key=lambda f: str(f.key)):
            pending.discard(f)
            yield f


def _run_tasks(client, tasks, settings, result: ClassRun, head_cfg, db_url, course_id, root, assignment, cells,
               local: bool, out) -> None:
    from distributed import wait
    from nbgrader.api import Gradebook

    spec = {"settings": settings, "versions": engine_worker.versions()}
    good, bad = preflight_all(client, spec, out)
    result.accepted, result.refused = good, bad
    if not good:
        raise GradingSetupError("no worker passed the preflight (reasons above): nothing was graded")
    if local:   # the machine's cores shared out between the kernels of the embedded cluster
        threads = max(1, (os.cpu_count() or 1) // len(good))
        for t in tasks:
            t["threads"] = threads
    token = uuid.uuid4().hex[:8]
    futs = {}
    for i, t in enumerate(tasks):
        f = client.submit(engine_worker.grade_task, t, key=f"tas-grade-{token}-{i}", workers=good,
                          allow_other_workers=False, retries=1, pure=False)
        futs[f] = t
    seen: set[tuple[str, str]] = set()
    bar = Progress(len(tasks), f"grading {assignment} on {len(good)} worker(s)")
    try:
        with Gradebook(db_url, course_id) as gb:
            for f in _completed(list(futs), wait):
                t = futs[f]
                ident = (t["student"], t["notebook"])
                if ident in seen:
                    raise RuntimeError(f"a second result for {ident}: refusing to record it twice")
                seen.add(ident)
                if f.status == "finished":
                    res = f.result()
                else:
                    try:
                        e = f.exception()
                    except BaseException as x:  # noqa: BLE001  (a cancelled future raises here)
                        e = x
                    res = {"student": t["student"], "notebook": t["notebook"], "status": "failed",
                           "reason": f"the cluster could not grade it: {type(e).__name__}: {e}"[:500]}
                run = record(gb, head_cfg, db_url, root, assignment, res, cells[t["notebook"]])
                result.runs.append(run)
                bar.step(f"{run.student}/{run.notebook}: {run.status}")
    finally:
        bar.close()


# ----------------------------------------------------------------------------- report and CLI

def format_class(r: ClassRun) -> str:
    rows = [("student", "notebook", "status", "score", "seconds", "worker")]
    for x in r.runs:
        score = f"{x.score:g}/{x.max_score:g}" if x.status == "graded" else "-"
        rows.append((x.student, x.notebook, x.status, score, f"{x.seconds:.1f}", x.worker))
    w = [max(len(row[i]) for row in rows) for i in range(6)]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    graded = sum(1 for x in r.runs if x.status == "graded")
    lines.append(f"\n{graded} student-notebooks graded in {r.wall:.1f} s on {len(r.accepted)} worker(s)"
                 + (f"; {len(r.refused)} worker(s) refused" if r.refused else ""))
    for s, notes in r.notes.items():
        for n in notes:
            lines.append(f"note {s}: {n}")
    bad = [x for x in r.runs if not x.ok]
    if bad:
        lines.append(f"\n{len(bad)} student-notebook(s) not graded:")
        for x in bad:
            lines.append(f"--- {x.student}/{x.notebook}: {x.status}: {x.reason}")
            if x.log_tail:
                lines.append("\n".join(x.log_tail.splitlines()[-8:]))
    return "\n".join(lines)


def add_class_arguments(p) -> None:
    """The options every engine command takes: assignment, workers, scheduler, students, root."""
    p.add_argument("assignment")
    p.add_argument("--workers", type=int, default=None,
                   help="LocalCluster processes (default: CPUs); with --scheduler, workers to wait for (default 1)")
    p.add_argument("--scheduler", default=None, help="tcp://HOST:PORT of an existing Dask scheduler")
    p.add_argument("--student", nargs="+", action="extend", default=None, help="only these students")
    p.add_argument("--root", default=None, help="course root (default: $TAS_COURSE_ROOT or this repository)")


def main(argv=None) -> int:
    from .paths import course_root

    p = argparse.ArgumentParser(prog="python -m solutions_lib.course.engine",
                                description="Autograde a class on Dask: one task per student-notebook, one gradebook.")
    add_class_arguments(p)
    p.add_argument("--timeout", type=float, default=None, help="seconds one student-notebook may take")
    a = p.parse_args(argv)
    try:
        root = Path(a.root) if a.root else course_root()
        workers = a.workers or (1 if a.scheduler else None)
        r = grade_class(root, a.assignment, a.student, workers, a.scheduler, a.timeout)
    except (GradingSetupError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_class(r))
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())
