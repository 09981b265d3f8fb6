"""What a Dask worker runs: one student-notebook graded in a throw-away nbgrader course.

A task (`grade_task`) is plain data: the submitted notebook's bytes, the assignment's source
notebook (solutions and hidden tests), the student's other submitted files, the submission's
timestamp and the course settings the head read from its `nbgrader_config.py` (cell timeout,
this term's seed key, sandbox mode, grader-side cells). Nothing refers to a path on the head,
so a worker needs no copy of the course: only this package, nbgrader and the kernel's
libraries installed (docs/engine.md).

On the worker the task becomes a fresh course in a temporary folder with its own SQLite
gradebook: `nbgrader_config.py` (the course's own `apply_course_config`: sandboxed kernel,
CourseExecute, the trusted run and the integrity check, grader-side cells, neutraliser,
intake), `source/<A>/<nb>.ipynb`, and `release/` + gradebook rows made by stock
`nbgrader generate_assignment` (once per source notebook and settings on this machine, then
copied: a template). The student's files go to `submitted/<S>/<A>/` and stock
`nbgrader autograde <A> --student <S> --force` grades them. What comes back is data: the
autograded notebook (bytes), the per-cell scores and comments nbgrader's SaveAutoGrades wrote
into the throw-away gradebook, the log tail, timing and a status. The folder is deleted.

`preflight(spec)` proves a worker fit before it gets any student: same `solutions_lib` and
nbgrader as the head, and a tiny solved notebook, whose test cell imports the course package
in the kernel, graded to full marks through the very same path.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import nbgrader_cmd

#: The log lines kept in a result (the end of nbgrader's log says why a run failed).
LOG_TAIL_LINES = 40

_CONFIG = '''"""A throw-away grading course made by solutions_lib.course.engine_worker (deleted after use)."""
import os

from solutions_lib.course.config import apply_course_config

_root = os.path.dirname(os.path.abspath(__file__))
c = get_config()  # noqa: F821
apply_course_config(c, root=_root, cell_timeout={timeout})
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(_root, "gradebook.db")
{term}
'''


def base_dir() -> Path:
    """This worker's scratch folder: $TAS_ENGINE_DIR, else <tmp>/tas-engine-<uid> (mode 0700)."""
    d = Path(os.environ.get("TAS_ENGINE_DIR") or Path(tempfile.gettempdir()) / f"tas-engine-{os.getuid()}")
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    return d


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the worker that started it dies (Linux prctl), so a
    killed worker leaves no nbgrader (and, with it, no kernel) grading on."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _env(task: dict) -> dict:
    env = dict(os.environ)
    for k in ("TAS_DB_URL", "TAS_DB_URL_ROOT", "TAS_COURSE_SECRET", "TAS_COURSE_ROOT"):
        env.pop(k, None)  # nothing on this machine may point the throw-away course elsewhere
    env["TAS_SANDBOX"] = task["sandbox"]
    env["TAS_GRADER_SIDE"] = task["grader_side"]
    threads = str(task.get("threads") or _threads_per_task())
    env.setdefault("OMP_NUM_THREADS", threads)
    env.setdefault("MKL_NUM_THREADS", threads)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])
    return env


def _threads_per_task() -> int:
    """This machine's cores shared out between the tasks its worker runs at once."""
    try:
        from distributed import get_worker
        slots = get_worker().state.nthreads
    except (ImportError, ValueError, AttributeError):
        slots = 1
    return max(1, (os.cpu_count() or 1) // max(1, slots))


def _run(args: list[str], cwd: Path, env: dict, timeout: float) -> tuple[int | None, str]:
    """A stock nbgrader command (through nbgrader_cmd: the same nbgrader, faster to start);
    (returncode or None on timeout, log)."""
    proc = subprocess.Popen(nbgrader_cmd.command(*args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True, preexec_fn=_die_with_parent)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                out, _ = proc.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                out = ""
        return None, (out or "") + f"\nkilled after {timeout:g} s (the task's time limit)"


def _template(task: dict) -> Path:
    """A generated one-notebook course for this source notebook and these settings, made once
    on this machine (file lock: a worker's threads and processes share it)."""
    key = hashlib.sha256(json.dumps([task["assignment"], task["notebook"], task["cell_timeout"], task["term_key"],
                                     hashlib.sha256(task["source"]).hexdigest()]).encode()).hexdigest()[:24]
    base = base_dir()
    done = base / f"template-{key}"
    with open(base / f"template-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (done / ".ready").is_file():
            return done
        build = Path(tempfile.mkdtemp(prefix=f"build-{key}-", dir=base))
        term = (f"os.environ['TAS_TERM_SEED'] = {task['term_key']!r}" if task["term_key"]
                else "os.environ.pop('TAS_TERM_SEED', None)")
        (build / "nbgrader_config.py").write_text(_CONFIG.format(timeout=int(task["cell_timeout"]), term=term))
        src = build / "source" / task["assignment"]
        src.mkdir(parents=True)
        (src / f"{task['notebook']}.ipynb").write_bytes(task["source"])
        rc, log = _run(["generate_assignment", task["assignment"], "--force"], build, _env(task), 600)
        if rc != 0:
            shutil.rmtree(build, ignore_errors=True)
            raise RuntimeError(f"nbgrader generate_assignment failed on worker {socket.gethostname()}:\n"
                               + _tail(log))
        (build / ".ready").write_text("ok")
        shutil.rmtree(done, ignore_errors=True)
        os.replace(build, done)
        return done


def _tail(log: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(log.rstrip().splitlines()[-lines:])


def _safe_rel(name: str) -> str:
    """A submitted file's relative path, refused when it could leave the submission folder."""
    p = Path(name)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"refused file name {name!r} in a task")
    return str(p)


def _gradebook_rows(course: Path, task: dict) -> tuple[dict, dict]:
    """({grade_id: {auto_score, max_score, needs_manual_grade, cell_type}}, {grade_id: auto_comment})
    that SaveAutoGrades wrote for this notebook in the throw-away gradebook."""
    from nbgrader.api import Gradebook

    grades, comments = {}, {}
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        sub = gb.find_submission_notebook(task["notebook"], task["assignment"], task["student"])
        for g in sub.grades:
            grades[g.name] = {"auto_score": None if g.auto_score is None else float(g.auto_score),
                              "max_score": float(g.max_score), "needs_manual_grade": bool(g.needs_manual_grade),
                              "cell_type": g.cell_type}
        for cm in sub.comments:
            comments[cm.name] = cm.auto_comment
    return grades, comments


def _reason(log: str) -> str:
    """Why a run failed: nbgrader's intake refusal, else the last 'SomeError: message' line."""
    for line in log.splitlines():
        if "refused at intake:" in line:
            return line.split("refused at intake:", 1)[1].strip()[:300]
    for line in reversed(log.splitlines()):
        m = re.match(r"\s*([\w.]*(?:Error|Exception|Exit)\b.*)", line)
        if m:
            return m.group(1).strip()[:300]
    return "nbgrader autograde failed (see the log)"


def grade_task(task: dict) -> dict:
    """Grade one student-notebook (see the module docstring); never raises for the student's
    doing: a notebook that cannot be graded comes back with status "failed" and the reason."""
    t0 = time.perf_counter()
    started = time.time()
    template = _template(task)
    work = Path(tempfile.mkdtemp(prefix="task-", dir=base_dir()))
    a, s, nb = task["assignment"], task["student"], task["notebook"]
    try:
        course = work / "course"
        shutil.copytree(template, course)
        sub = course / "submitted" / s / a
        sub.mkdir(parents=True)
        for name, data in (task.get("files") or {}).items():
            path = sub / _safe_rel(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (sub / f"{nb}.ipynb").write_bytes(task["submission"])
        if task.get("timestamp"):
            (sub / "timestamp.txt").write_text(task["timestamp"])
        rc, log = _run(["autograde", a, "--student", s, "--force"], course, _env(task),
                       float(task.get("timeout_s") or 1800))
        graded = course / "autograded" / s / a / f"{nb}.ipynb"
        result = {"student": s, "notebook": nb, "assignment": a, "task_id": task.get("task_id"),
                  "worker": f"{socket.gethostname()}:{os.getpid()}", "started": started,
                  "returncode": rc, "log_tail": _tail(log)}
        if rc == 0 and graded.is_file():
            grades, comments = _gradebook_rows(course, task)
            result.update(status="graded", autograded=graded.read_bytes(), grades=grades, comments=comments,
                          reason="")
        else:
            result.update(status="timeout" if rc is None else "failed", autograded=None, grades={}, comments={},
                          reason=_reason(log) if rc is not None else "the task's time limit was reached")
        result["seconds"] = time.perf_counter() - t0
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------- preflight

PREFLIGHT_ASSIGNMENT = "tas_preflight"
PREFLIGHT_STUDENT = "preflight"


def preflight_notebooks() -> tuple[bytes, bytes]:
    """(source, solved submission) of a one-question notebook whose test cell imports the
    course package in the grading kernel: full marks only if the kernel can import it."""
    import nbformat

    from . import notebooks as nbs

    src = nbs.normalise(nbs.new_notebook([
        nbs.answer("twice", "def twice(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"),
        nbs.tests("twice_tests",
                  "from solutions_lib.grading import expect_close\n"
                  "expect_close(twice(21), 42, 'twice(21)')\n"
                  "### BEGIN HIDDEN TESTS\n"
                  "expect_close(twice(-1.5), -3.0, 'twice(-1.5)')\n"
                  "### END HIDDEN TESTS", 1, []),
    ]))
    solved = nbformat.reads(nbformat.writes(src), as_version=4)
    for cell in solved.cells:
        cell.source = nbs.strip_solution_markers(cell.source)
        if (cell.metadata.get("nbgrader") or {}).get("grade_id") == "twice_tests":
            cell.source = cell.source.split("### BEGIN HIDDEN TESTS")[0].rstrip()
    return nbformat.writes(src).encode(), nbformat.writes(solved).encode()


def versions() -> dict:
    """What must be the same on the head and on every worker for a grade to mean the same."""
    import nbgrader

    from .trusted import _PACKAGE
    h = hashlib.sha256()   # as trusted._library_hash, but read now: the files may have changed since
    for p in sorted(_PACKAGE.rglob("*.py")):
        h.update(str(p.relative_to(_PACKAGE)).encode())
        h.update(p.read_bytes())
    return {"solutions_lib": h.hexdigest(), "nbgrader": nbgrader.__version__,
            "python": "%d.%d" % sys.version_info[:2]}


_PREFLIGHT: dict[str, dict] = {}


def preflight(spec: dict) -> dict:
    """{"ok": bool, "reason": str, "host": ..., "seconds": ...}: this worker may grade the class
    of `spec` (the head's settings and versions) only when its versions match and a solved
    notebook whose test imports the course package gets full marks here. Cached per process."""
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    if key in _PREFLIGHT:
        return _PREFLIGHT[key]
    t0 = time.perf_counter()
    host = f"{socket.gethostname()}:{os.getpid()}"
    out = {"ok": False, "reason": "", "host": host, "python": sys.executable}
    try:
        mine = versions()
        diff = [f"{k}: head {spec['versions'][k]}, worker {mine.get(k)}" for k in spec["versions"]
                if spec["versions"][k] != mine.get(k)]
        if diff:
            out["reason"] = ("this worker's software differs from the head's (" + "; ".join(diff)
                             + "): install the course's commit and lock file here")
        else:
            src, solved = preflight_notebooks()
            res = grade_task({**spec["settings"], "assignment": PREFLIGHT_ASSIGNMENT, "notebook": "check",
                              "student": PREFLIGHT_STUDENT, "source": src, "submission": solved,
                              "files": {}, "timestamp": None, "task_id": "preflight", "timeout_s": 900})
            if res["status"] != "graded":
                out["reason"] = (f"a solved check notebook did not run to the end here: {res['reason']}\n"
                                 + res["log_tail"][-1500:])
            else:
                got = sum(g["auto_score"] or 0 for g in res["grades"].values())
                full = sum(g["max_score"] for g in res["grades"].values())
                if got < full or not res["grades"]:
                    import nbformat

                    from .grader import error_messages
                    errors = [m for c in nbformat.reads(res["autograded"].decode(), as_version=4).cells
                              for m in error_messages(c)]
                    out["reason"] = (f"a solved check notebook scored {got:g} of {full:g} here: the grading "
                                     "kernel cannot use the course package (" + ("; ".join(errors)[:600] or
                                                                               "no error message") + ")")
                else:
                    out["ok"] = True
    except Exception as e:  # noqa: BLE001  (anything that stops grading here is a refusal, with its reason)
        out["reason"] = f"{type(e).__name__}: {e}"[:2000]
    out["seconds"] = time.perf_counter() - t0
    _PREFLIGHT[key] = out
    return out
