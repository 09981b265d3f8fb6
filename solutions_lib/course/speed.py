"""Grading speed: stock `nbgrader autograde` vs plain execution of the same notebooks.

`python -m solutions_lib bench grading [--assignments 01_optimizers,03_memory]` builds a
throw-away course (release/ from source/, one student who hands in the solved notebooks), then
for every assignment

- *plain*: runs each solved notebook with nbclient in-process (same kernel and kernel
  arguments, same per-cell timeout, the notebook in a folder laid out as nbgrader's
  autograded/<student>/<assignment>/), kernel start and shutdown included;
- *autograde*: runs `nbgrader autograde A --student S --force` as a subprocess in the course
  root, as an instructor does, with an nbgrader_config.py that calls `apply_course_config`
  (TAS_SANDBOX as in the environment, default on);

and prints both wall times and their ratio, per assignment and in total (goal: <= 1.3x), then
where the difference goes. The autograde subprocess is profiled from inside (the bench's own
nbgrader_config.py wraps a few nbgrader/nbclient methods with timers when TAS_GRADING_PROFILE
names a file): process start and imports, config, gradebook opens, kernel start/stop and the
rest of each notebook. Fixed costs are also measured in isolation: `nbgrader --version`,
the import of nbgrader, opening the gradebook (an existing one, and a new one, which runs
`alembic heads` in a subprocess), and a kernel start with and without the sandbox.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import nbgrader_cmd

GOAL = 1.3
STUDENT = "s01_solved"

# ---------------------------------------------------------------- profiler (both processes)

_PROFILE: dict | None = None


def _record(name: str, seconds: float) -> None:
    if _PROFILE is None:
        return
    nb = _PROFILE["current"]
    _PROFILE["events"].append([name, nb, seconds])


def _timed(name: str, fn):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _record(name, time.perf_counter() - t)
    wrapper.__wrapped__ = fn
    return wrapper


def _atimed(name: str, fn):
    async def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            _record(name, time.perf_counter() - t)
    wrapper.__wrapped__ = fn
    return wrapper


def install_profiler(path: str | None = None, t_config: float | None = None) -> dict:
    """Wrap nbgrader's and nbclient's slow steps with timers (idempotent).

    With `path`, the events are written there as JSON when the process exits (used by the
    bench's nbgrader_config.py inside the `nbgrader autograde` subprocess)."""
    global _PROFILE
    if _PROFILE is not None:
        return _PROFILE
    from nbclient.client import NotebookClient
    from nbgrader.api import Gradebook
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    _PROFILE = {"current": None, "events": [], "t_config": t_config, "t_exit": None}
    NotebookClient.start_new_kernel = _timed("kernel_start", NotebookClient.start_new_kernel)
    NotebookClient.start_new_kernel_client = _timed("kernel_ready", NotebookClient.start_new_kernel_client)
    NotebookClient._cleanup_kernel = _timed("kernel_stop", NotebookClient._cleanup_kernel)
    NotebookClient.async_start_new_kernel = _atimed("kernel_start", NotebookClient.async_start_new_kernel)
    NotebookClient.async_start_new_kernel_client = _atimed("kernel_ready", NotebookClient.async_start_new_kernel_client)
    NotebookClient._async_cleanup_kernel = _atimed("kernel_stop", NotebookClient._async_cleanup_kernel)
    Gradebook.__init__ = _timed("gradebook_open", Gradebook.__init__)
    Execute.preprocess = _timed("execute", Execute.preprocess)
    Autograde.init_assignment = _timed("init_assignment", Autograde.init_assignment)
    orig_convert = Autograde.convert_single_notebook

    def convert_single_notebook(self, notebook_filename):
        _PROFILE["current"] = os.path.basename(notebook_filename)
        t = time.perf_counter()
        try:
            return orig_convert(self, notebook_filename)
        finally:
            _record("notebook", time.perf_counter() - t)
            _PROFILE["current"] = None

    Autograde.convert_single_notebook = convert_single_notebook
    if path:
        def dump():
            _PROFILE["t_exit"] = time.time()
            with open(path, "w") as f:
                json.dump(_PROFILE, f)
        atexit.register(dump)
    return _PROFILE


def _cpu() -> float:
    """CPU seconds of this process and of its children that have been waited for (kernels,
    the nbgrader subprocess and, through it, its kernels): a measure that a busy machine
    disturbs less than wall time."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _sum(events, name, nb="*"):
    return sum(s for n, b, s in events if n == name and (nb == "*" or b == nb))


# ---------------------------------------------------------------- the throw-away course

CONFIG_TEMPLATE = '''\
"""nbgrader_config.py of a throw-away course made by `python -m solutions_lib bench grading`."""
import os
import sys
import time

_t_config = time.time()
sys.path.insert(0, {repo!r})
from solutions_lib.course.config import apply_course_config  # noqa: E402

c = get_config()  # noqa: F821
apply_course_config(c, root=os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TAS_GRADING_BASELINE"):
    from solutions_lib.course.speed import undo_cuts
    undo_cuts(c)
if os.environ.get("TAS_GRADING_PROFILE"):
    from solutions_lib.course.speed import install_profiler
    prof = install_profiler(os.environ["TAS_GRADING_PROFILE"], _t_config)
    prof.setdefault("config_s", time.time() - _t_config)  # the file may be read twice
'''


def undo_cuts(c) -> None:
    """Put back nbgrader's stock values of the settings `apply_course_config` sets for speed
    alone (the baseline of `bench grading --baseline` and of tests/test_grading_speed.py)."""
    c.Execute.shutdown_kernel = "graceful"


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def build_course(dest: Path, names: list[str], student: str = STUDENT, source_root: Path | None = None) -> Path:
    """dest/: source/ for `names`, release/ (generate_assignment), nbgrader_config.py, and
    submitted/<student>/<a>/ holding the solved release notebooks."""
    import nbformat

    from . import notebooks as nbs
    from .grader import Course, make_course, solved_version

    root = make_course(dest, names, source_root or repo_root())
    (root / "nbgrader_config.py").write_text(CONFIG_TEMPLATE.format(repo=str(repo_root())))
    course = Course(root)
    for a in names:
        course.generate(a)
        notebooks = {}
        for p in sorted((root / "release" / a).glob("*.ipynb")):
            rel = nbformat.read(p, as_version=4)
            notebooks[p.name] = solved_version(rel, nbs.read(root / "source" / a / p.name))
        course.submit(student, a, notebooks)
    return root


def _plain_folder(root: Path, a: str, student: str) -> Path:
    """plain/<student>/<a>/: the submitted notebooks with the sources nbgrader runs
    (`graded_sources`) and the source's other files, as nbgrader lays out
    autograded/<student>/<a>/."""
    import nbformat

    from .config import IGNORE

    dest = root / "plain" / student / a
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root / "source" / a, dest, ignore=shutil.ignore_patterns(*IGNORE, "*.ipynb"))
    for p in (root / "submitted" / student / a).glob("*.ipynb"):
        nbformat.write(graded_sources(root, a, p), dest / p.name)
    return dest


def graded_sources(root: Path, a: str, path: Path):
    """The submitted notebook at `path` with the sources nbgrader runs: like its OverwriteCells,
    every locked cell and every test cell comes back from the gradebook (the hidden tests
    included), so plain execution runs the same code as autograde."""
    import nbformat
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.utils import is_grade, is_locked, is_solution

    from .config import COURSE_ID, gradebook_url

    nb = nbformat.read(path, as_version=4)
    with Gradebook(gradebook_url(root), COURSE_ID) as gb:
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid is None:
                continue
            try:
                src = gb.find_source_cell(gid, path.stem, a)
            except MissingEntry:
                continue
            if is_locked(cell) or (is_grade(cell) and not is_solution(cell)) or src.locked:
                cell.source = src.source
    return nb


def plain_execute(path: Path, cell_timeout: int | None = None) -> dict:
    """Run one notebook with nbclient as nbgrader's Execute would (same kernel arguments,
    timeout, errors allowed), kernel start and shutdown included; returns timings."""
    import nbformat
    from nbclient import NotebookClient

    from .config import CELL_TIMEOUT_S, apply_course_config
    from traitlets.config import Config

    c = Config()
    apply_course_config(c, root=str(path.parent))
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=cell_timeout or CELL_TIMEOUT_S, interrupt_on_timeout=True,
                            allow_errors=True, extra_arguments=list(c.Execute.extra_arguments),
                            resources={"metadata": {"path": str(path.parent)}})
    prof = install_profiler()
    prof["current"] = "plain:" + path.name
    n0 = len(prof["events"])
    t, cpu = time.perf_counter(), _cpu()
    try:
        client.execute()
    finally:
        total, cpu = time.perf_counter() - t, _cpu() - cpu
        prof["current"] = None
    ev = prof["events"][n0:]
    return {"total": total, "cpu": cpu, "kernel_start": _sum(ev, "kernel_start") + _sum(ev, "kernel_ready"),
            "kernel_stop": _sum(ev, "kernel_stop")}


def autograde_subprocess(root: Path, a: str, student: str = STUDENT, env: dict | None = None) -> dict:
    """`nbgrader autograde a --student s --force` in the course root, profiled from inside."""
    fd, prof_path = tempfile.mkstemp(prefix="tas-grading-profile-", suffix=".json")
    os.close(fd)
    env = dict(os.environ if env is None else env)
    env["TAS_GRADING_PROFILE"] = prof_path
    try:
        t0, cpu = time.time(), _cpu()
        proc = subprocess.run([nbgrader_cmd.stock_executable(), "autograde", a, "--student", student, "--force"],
                              cwd=root, env=env, capture_output=True, text=True)
        t1, cpu = time.time(), _cpu() - cpu
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader autograde {a} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        with open(prof_path) as f:
            prof = json.load(f)
    finally:
        os.unlink(prof_path)
    ev = prof["events"]
    nbs = sorted({b for n, b, s in ev if n == "notebook"})
    per_nb = {b: {"total": _sum(ev, "notebook", b), "execute": _sum(ev, "execute", b),
                  "kernel_start": _sum(ev, "kernel_start", b) + _sum(ev, "kernel_ready", b),
                  "kernel_stop": _sum(ev, "kernel_stop", b),
                  "gradebook_opens": sum(1 for n, bb, s in ev if n == "gradebook_open" and bb == b)} for b in nbs}
    return {"total": t1 - t0, "cpu": cpu, "startup": prof["t_config"] - t0, "config": prof.get("config_s", 0.0),
            "exit": t1 - prof["t_exit"], "init_assignment": _sum(ev, "init_assignment"),
            "gradebook_opens": sum(1 for n, b, s in ev if n == "gradebook_open"),
            "gradebook_s": _sum(ev, "gradebook_open"), "notebooks": per_nb}


# ---------------------------------------------------------------- fixed costs in isolation


def _median_wall(cmd: list[str], n: int = 3, **kw) -> float:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, **kw)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def kernel_start_stop(sandbox: bool, cwd: Path, n: int = 3) -> tuple[float, float]:
    """Median (start until ready, shutdown) of a python3 kernel, plain or in the sandbox."""
    from jupyter_client.manager import AsyncKernelManager

    from .sandbox import SandboxKernelManager
    import asyncio

    from .config import apply_course_config
    from traitlets.config import Config

    c = Config()
    apply_course_config(c, root=str(cwd))
    extra = list(c.Execute.extra_arguments)

    async def once():
        km = (SandboxKernelManager(course_root=str(cwd.parent)) if sandbox else AsyncKernelManager())
        t = time.perf_counter()
        await km.start_kernel(extra_arguments=extra, cwd=str(cwd))
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=60)
        t_ready = time.perf_counter() - t
        t = time.perf_counter()
        kc.stop_channels()
        await km.shutdown_kernel()
        await km.cleanup_resources() if hasattr(km, "cleanup_resources") else None
        return t_ready, time.perf_counter() - t

    starts, stops = [], []
    for _ in range(n):
        a, b = asyncio.run(once())
        starts.append(a)
        stops.append(b)
    return statistics.median(starts), statistics.median(stops)


def fixed_costs(root: Path, sandbox: bool, repeats: int = 3) -> dict:
    from nbgrader.api import Gradebook

    from .config import gradebook_url

    py = sys.executable

    n = repeats
    out = {"python": _median_wall([py, "-c", "pass"], n),
           "nbgrader_version": _median_wall([nbgrader_cmd.stock_executable(), "--version"], n, cwd=root),
           "import_nbgrader": _median_wall([py, "-c", "import nbgrader.apps.nbgraderapp"], n),
           "import_nbgrader_no_rfc3987": _median_wall(
               [py, "-c", "import sys; sys.modules['rfc3987_syntax'] = None; import nbgrader.apps.nbgraderapp"], n),
           "import_rfc3987_syntax": _median_wall([py, "-c", "import rfc3987_syntax"], n),
           "nbgrader_cmd_version": _median_wall(nbgrader_cmd.command("--version"), n, cwd=root)}
    url = gradebook_url(root)
    ts = []
    for _ in range(10):
        t = time.perf_counter()
        Gradebook(url, "training-at-scale").close()
        ts.append(time.perf_counter() - t)
    out["gradebook_open"] = statistics.median(ts)
    d = Path(tempfile.mkdtemp(prefix="tas-gb-"))
    try:
        t = time.perf_counter()
        Gradebook("sqlite:///" + str(d / "gradebook.db"), "training-at-scale").close()
        out["gradebook_new"] = time.perf_counter() - t
    finally:
        shutil.rmtree(d, ignore_errors=True)
    kdir = root / "plain" / "_kernel"
    kdir.mkdir(parents=True, exist_ok=True)
    out["kernel_plain"] = kernel_start_stop(False, kdir, n)
    if sandbox:
        out["kernel_sandbox"] = kernel_start_stop(True, kdir, n)
    return out


# ---------------------------------------------------------------- the bench


def sandbox_mode() -> tuple[str, bool]:
    from .sandbox import sandbox_available

    mode = os.environ.get("TAS_SANDBOX", "on")
    return mode, mode != "off" and sandbox_available()[0]


def _scores(res) -> dict:
    return {(n.name, c.grade_id): c.points for n in res.notebooks for c in n.cells}


def run(assignments: list[str] | None = None, out=print, keep: Path | None = None,
        baseline: bool = False, source_root: Path | None = None, repeats: int = 3) -> dict:
    """Measure; returns the numbers (see `grading`, which prints them). With `baseline`, each
    assignment is autograded a second time with nbgrader's stock values of the settings that
    `apply_course_config` sets for speed alone (`undo_cuts`), and the scores are compared."""
    from .grader import ensure_tools_on_path, read_results
    from .paths import assignments as all_assignments

    ensure_tools_on_path()
    names = list(assignments or all_assignments(source_root or repo_root()))
    mode, sandboxed = sandbox_mode()
    tmp = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="tas-grading-bench-"))
    rows = []
    try:
        t = time.perf_counter()
        root = build_course(tmp, names, source_root=source_root)
        out(f"course built in {time.perf_counter() - t:.1f} s: {len(names)} assignment(s), student {STUDENT}, "
            f"TAS_SANDBOX={mode} ({'sandboxed' if sandboxed else 'plain'} kernels in autograde)")
        install_profiler()
        fixed = fixed_costs(root, sandboxed, repeats)
        # a cold cache of trusted runs, timed on their own: once per notebook, not per student
        os.environ["TAS_TRUSTED_CACHE"] = str(tmp / "trusted-cache")
        from .trusted import trusted_records
        for a in names:
            folder = _plain_folder(root, a, STUDENT)
            plain = {p.name: plain_execute(p) for p in sorted(folder.glob("*.ipynb"))}
            row = {"assignment": a, "plain": plain}
            t = time.perf_counter()
            for src in sorted((root / "source" / a).glob("*.ipynb")):
                trusted_records(src)
            row["trusted"] = time.perf_counter() - t
            if baseline:
                row["baseline"] = autograde_subprocess(root, a, env=dict(os.environ, TAS_GRADING_BASELINE="1"))
                row["baseline_scores"] = _scores(read_results(root, a, STUDENT))
            row["autograde"] = ag = autograde_subprocess(root, a)
            res = read_results(root, a, STUDENT)
            row.update(score=res.score("tests"), max_score=res.max_score("tests"),
                       failed=[n.name for n in res.failed], scores=_scores(res))
            rows.append(row)
            p = sum(v["total"] for v in plain.values())
            out(f"  {a}: plain {p:.1f} s, autograde {ag['total']:.1f} s"
                + (f", stock settings {row['baseline']['total']:.1f} s" if baseline else ""))
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"mode": mode, "sandboxed": sandboxed, "fixed": fixed, "rows": rows, "baseline": baseline}


def format_report(r: dict) -> tuple[str, bool]:
    rows, fx = r["rows"], r["fixed"]
    L = []
    base = r.get("baseline")
    L.append(f"{'assignment':<24} {'nbs':>3} {'plain':>8} {'autograde':>10} {'ratio':>6} "
             + (f"{'stock settings':>14} {'ratio':>6} " if base else "")
             + f"{'startup':>8} {'per-nb over':>11} {'score':>9}")
    tp = ta = tb = 0.0
    same = True
    for row in rows:
        p = sum(v["total"] for v in row["plain"].values())
        ag = row["autograde"]
        n = len(row["plain"])
        over = (ag["total"] - ag["startup"] - ag["config"] - p) / max(n, 1)
        tp += p
        ta += ag["total"]
        score = f"{row['score']:g}/{row['max_score']:g}" + (" FAILED" if row["failed"] else "")
        b = ""
        if base:
            tb += row["baseline"]["total"]
            b = f"{row['baseline']['total']:>13.1f}s {row['baseline']['total'] / p:>5.2f}x "
            if row["baseline_scores"] != row["scores"]:
                same = False
                score += " (stock settings score differently!)"
        L.append(f"{row['assignment']:<24} {n:>3} {p:>7.1f}s {ag['total']:>9.1f}s {ag['total'] / p:>5.2f}x {b}"
                 f"{ag['startup'] + ag['config']:>7.2f}s {over:>10.2f}s {score:>9}")
    ratio = ta / tp if tp else float("inf")
    L.append(f"{'total':<24} {sum(len(r_['plain']) for r_ in rows):>3} {tp:>7.1f}s {ta:>9.1f}s {ratio:>5.2f}x "
             + (f"{tb:>13.1f}s {tb / tp:>5.2f}x" if base else ""))
    ok = ratio <= GOAL and not any(row["failed"] for row in rows) and same
    L.append(f"goal: autograde <= {GOAL}x plain execution -> {'met' if ok else 'NOT met'} "
             f"(TAS_SANDBOX={r['mode']}, {'sandboxed' if r['sandboxed'] else 'plain'} kernels)")
    if all("trusted" in row for row in rows):
        tt = sum(row["trusted"] for row in rows)
        L.append(f"trusted run of the solutions (once per notebook, cached for every student): {tt:.1f} s "
                 f"= {tt / tp if tp else float('inf'):.2f}x one plain execution; not in the autograde column")
    if base:
        L.append("stock settings: the same command with nbgrader's own values of the settings the course "
                 "config sets for speed alone (speed.undo_cuts); per-cell scores "
                 + ("identical" if same else "DIFFER"))
    if r["sandboxed"]:
        L.append("CPU time: not shown with sandboxed kernels (their CPU time does not come back "
                 "through bwrap to the grader); run with TAS_SANDBOX=off for it")
    elif all("cpu" in row["autograde"] for row in rows):
        cp = sum(v["cpu"] for row in rows for v in row["plain"].values())
        ca = sum(row["autograde"]["cpu"] for row in rows)
        L.append(f"CPU time (grader + kernels, all processes): plain {cp:.1f} s, autograde {ca:.1f} s -> "
                 f"{ca / cp:.2f}x" + (f", stock settings {sum(row['baseline']['cpu'] for row in rows):.1f} s"
                                      if base else "") + " (a busy machine moves this less than wall time)")
    kx_plain = sum(v["kernel_stop"] for row in rows for v in row["plain"].values())
    kx_ag = sum(v["kernel_stop"] for row in rows for v in row["autograde"]["notebooks"].values())
    L.append(f"ratio with kernel shutdown left out on both sides: {(ta - kx_ag) / (tp - kx_plain):.2f}x "
             f"(plain nbclient shuts kernels down gracefully: {kx_plain:.1f} s in all)")
    # where the difference goes, summed over all the autograde commands
    n_cmd = len(rows)
    nb_rows = [(row["plain"][k], row["autograde"]["notebooks"].get(k)) for row in rows for k in row["plain"]]
    nb_rows = [(p, a) for p, a in nb_rows if a]
    startup = sum(row["autograde"]["startup"] for row in rows)
    config = sum(row["autograde"]["config"] for row in rows)
    init = sum(row["autograde"]["init_assignment"] for row in rows)
    exit_ = sum(row["autograde"]["exit"] for row in rows)
    ks_a = sum(a["kernel_start"] for p, a in nb_rows)
    ks_p = sum(p["kernel_start"] for p, a in nb_rows)
    kx_a = sum(a["kernel_stop"] for p, a in nb_rows)
    kx_p = sum(p["kernel_stop"] for p, a in nb_rows)
    cells_a = sum(a["execute"] - a["kernel_start"] - a["kernel_stop"] for p, a in nb_rows)
    cells_p = sum(p["total"] - p["kernel_start"] - p["kernel_stop"] for p, a in nb_rows)
    rest = sum(a["total"] - a["execute"] for p, a in nb_rows)
    gb_n = sum(row["autograde"]["gradebook_opens"] for row in rows)
    gb_s = sum(row["autograde"]["gradebook_s"] for row in rows)
    L.append("")
    L.append(f"where autograde - plain = {ta - tp:+.1f} s goes ({n_cmd} command(s), {len(nb_rows)} notebook(s)):")
    L.append(f"  process start + imports (until nbgrader_config.py runs) {startup:7.2f} s  ({startup / n_cmd:.2f} s/command)")
    L.append(f"  nbgrader_config.py (apply_course_config, sandbox probe)  {config:7.2f} s  ({config / n_cmd:.2f} s/command)")
    L.append(f"  init_assignment (gradebook rows, copying files)          {init:7.2f} s")
    L.append(f"  kernel start until ready: autograde - plain              {ks_a - ks_p:+7.2f} s  "
             f"({ks_a / max(len(nb_rows), 1):.2f} vs {ks_p / max(len(nb_rows), 1):.2f} s/notebook)")
    L.append(f"  kernel shutdown: autograde - plain                       {kx_a - kx_p:+7.2f} s  "
             f"({kx_a / max(len(nb_rows), 1):.2f} vs {kx_p / max(len(nb_rows), 1):.2f} s/notebook)")
    L.append(f"  running the cells: autograde - plain                     {cells_a - cells_p:+7.2f} s")
    L.append(f"  per notebook outside Execute (sanitize, other preprocessors, gradebook, write) "
             f"{rest:.2f} s ({rest / max(len(nb_rows), 1):.2f} s/notebook)")
    L.append(f"  exit (after nbgrader finished)                           {exit_:7.2f} s")
    L.append(f"  gradebook opens: {gb_n} taking {gb_s:.2f} s in all")
    L.append("")
    L.append("fixed costs measured in isolation (median of a few runs; gradebook open of 10):")
    L.append(f"  python -c pass                          {fx['python']:.2f} s")
    L.append(f"  nbgrader --version                      {fx['nbgrader_version']:.2f} s"
             + (f"; through nbgrader_cmd.py (no rfc3987_syntax): {fx['nbgrader_cmd_version']:.2f} s"
                if "nbgrader_cmd_version" in fx else ""))
    L.append(f"  import nbgrader (the command's module)  {fx['import_nbgrader']:.2f} s; "
             f"{fx['import_nbgrader_no_rfc3987']:.2f} s without rfc3987_syntax "
             f"(import rfc3987_syntax alone: {fx['import_rfc3987_syntax']:.2f} s)")
    L.append(f"  Gradebook open (existing SQLite)        {fx['gradebook_open'] * 1e3:.1f} ms; "
             f"new gradebook (runs `alembic heads`): {fx['gradebook_new'] * 1e3:.0f} ms")
    ks, kx = fx["kernel_plain"]
    L.append(f"  kernel start until ready / shutdown     plain {ks:.2f} / {kx:.2f} s" + (
        f"; sandbox {fx['kernel_sandbox'][0]:.2f} / {fx['kernel_sandbox'][1]:.2f} s" if "kernel_sandbox" in fx else ""))
    return "\n".join(L), ok


def grading(assignments: list[str] | None = None, out=print, baseline: bool = False, **kw) -> bool:
    """Run the bench and print its report; True when the goal is met. `kw`: see `run`."""
    def say(msg):
        out(msg)
        sys.stdout.flush()

    r = run(assignments, out=say, baseline=baseline, **kw)
    text, ok = format_report(r)
    out("autograde (stock `nbgrader autograde A --student S --force`) vs plain nbclient execution, one solved student")
    out(text)
    return ok
