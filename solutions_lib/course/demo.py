"""The main job: build release/, grade a sample class with stock nbgrader, print the table.

Runs the instructor's real workflow in the course root with the stock command-line tools, on
a representative sample (`make demo`: two assignments, one of them the lab) or on the whole
course (`make demo-all`, `python -m solutions_lib demo --all`, which first says how long):

1. `nbgrader generate_assignment A --force` for each assignment (release/ from source/);
2. a sample class in submitted/: a fully solved student, a blank one, a partly solved one
   and one whose kernel dies (`os._exit`) in the first notebook (the scanner flags it);
3. the trusted run of each source notebook (trusted.py; cached, so only the first run pays);
4. `nbgrader autograde A --student S --force`, one process per student and assignment, as many
   at once as there are CPUs (parallel.py's grade_student), with a progress line per
   notebook as it finishes; a student whose run fails is re-graded notebook by notebook
   (`--notebook N`) so that one crashed notebook does not take the others down with it;
5. `nbgrader generate_feedback A --force` and `nbgrader export` (grades.csv), the grade report;
6. a table, one row per student and assignment, in which a notebook that failed to run and
   written answers waiting for a person are shown as such, never as a 0; then where each
   file went.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from . import nbgrader_cmd
from . import notebooks as nbs
from . import parallel
from .grader import ensure_tools_on_path, read_results, solved_version
from .paths import assignments, course_root
from .report import write_report

STUDENTS = {
    "s01_solved": "every answer written",
    "s02_blank": "hands in the released notebooks untouched",
    "s03_partial": "answers the first half of each notebook",
    "s04_crash": "solved, but a cell in the first notebook kills the kernel",
}

#: `make demo`'s sample, {assignment: notebooks (None: all)}: the assignment that grades
#: fastest (NOTEBOOK_SECONDS) and the lab's DDP notebook (the lab's four notebooks take about
#: 40 s per solved student on 2 cores; its DDP part shows gloo ranks graded in a sandbox).
#: Together they show every kind of student: solved, blank, half, a crash in one notebook of
#: several (05: the others still graded) and in the only one (the lab: FAILED TO RUN).
SAMPLE = {"05_communication": None, "10_distributed_lab": ("exercises_1_ddp",)}

#: Seconds one solved student's notebook takes to grade (its trusted run, measured on the
#: 2-core development machine, load subtracted); the estimate of `demo --all` uses these
#: until this machine has measured its own (`_times_file()`).
NOTEBOOK_SECONDS = {
    "01_optimizers/exercises": 8.0, "01_optimizers/theory": 5.0,
    "02_lr_schedules/exercises": 7.0, "02_lr_schedules/theory": 7.0,
    "03_memory/exercises": 12.0, "03_memory/theory": 8.0,
    "04_parallelism/exercises": 10.0, "04_parallelism/theory": 6.0,
    "05_communication/exercises": 5.0, "05_communication/theory": 3.0,
    "06_compute_scaling/exercises": 7.0, "06_compute_scaling/theory": 8.0,
    "07_numerics_attention/exercises": 10.0, "07_numerics_attention/theory": 6.5,
    "08_data_checkpoints/exercises": 13.0, "08_data_checkpoints/theory": 5.0,
    "09_debugging_cost/exercises": 13.0, "09_debugging_cost/theory": 9.0,
    "10_distributed_lab/exercises_1_ddp": 6.0, "10_distributed_lab/exercises_2_zero_fsdp": 7.0,
    "10_distributed_lab/exercises_3_training_script": 13.0, "10_distributed_lab/theory": 8.0,
    "07_numerics_attention/exercises_2_flash_attention": 7.0, "09_debugging_cost/exercises_2_profiling": 9.0,
    "11_model_parallel/theory": 5.0, "11_model_parallel/exercises_1_tensor_sequence": 14.0,
    "11_model_parallel/exercises_2_pipeline_context": 13.0, "11_model_parallel/exercises_3_fsdp_sharded_optimizer": 15.0,
    "11_model_parallel/exercises_4_comm_bound": 10.0, "11_model_parallel/exercises_5_torch_apis": 9.0,
    "11_model_parallel/exercises_6_vocab_dropout": 10.0,
    # measured under load by the notebooks' authors (2026-11-27), to be replaced by this machine's own
    "12_experts_fp8_triton/theory": 8.0, "12_experts_fp8_triton/exercises_1_moe_ep": 10.0,
    "12_experts_fp8_triton/exercises_2_fp8": 10.0, "12_experts_fp8_triton/exercises_3_triton": 18.0,
    "13_capstone/theory": 6.0, "13_capstone/exercises": 30.0,
}
#: a notebook not in the table (nor measured yet)
DEFAULT_NOTEBOOK_SECONDS = 8.0
#: start and stop of one nbgrader process (imports, config, gradebook), seconds
PROCESS_SECONDS = 3.0
#: how much of a solved notebook's time each kind of student costs
KIND_FACTOR = {"s01_solved": 1.0, "s02_blank": 0.35, "s03_partial": 0.7, "s04_crash": 1.0}

_PRINT = threading.Lock()
_T0 = [time.time()]


def say(text: str) -> None:
    """One progress line, `[elapsed] text`, cut to 100 columns; safe from worker threads."""
    line = f"[{time.time() - _T0[0]:6.1f}s] {text}"
    with _PRINT:
        print(line[:100], flush=True)


def nbgrader(*args: str, root: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run a stock nbgrader command in the course root; its log is returned, not printed.
    (Through nbgrader_cmd.py: the same nbgrader, without a 1-3 s import nothing here uses.)"""
    cmd = nbgrader_cmd.command(*args)
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def release(root: Path, names: list[str] | None = None, verbose: bool = False) -> list[str]:
    """Build release/ from source/ for `names` (default: every assignment; always --force)."""
    names = list(names or assignments(root))
    for a in names:
        t = time.time()
        nbgrader("generate_assignment", a, "--force", root=root)
        if verbose:
            say(f"{'release':<12} {a:<36} {time.time() - t:5.1f} s")
    return names


def make_submissions(root: Path, assignment: str, only: tuple[str, ...] | None = None) -> None:
    """The sample class's submissions of `assignment` (of the notebooks `only`, default all)."""
    for student in STUDENTS:
        folder = root / "submitted" / student / assignment
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text("2026-11-20 12:00:00.000000 UTC")
        released = sorted((root / "release" / assignment).glob("*.ipynb"))
        for i, rel_path in enumerate(p for p in released if only is None or p.stem in only):
            rel = nbformat.read(rel_path, as_version=4)
            src = nbs.read(root / "source" / assignment / rel_path.name)
            if student == "s01_solved":
                nb = solved_version(rel, src)
            elif student == "s02_blank":
                nb = rel
            elif student == "s03_partial":
                nb = solved_version(rel, src, fraction=0.5)
            else:
                nb = solved_version(rel, src)
                if i == 0:
                    first = next(c for c in nb.cells if nbs.nbgrader_md(c).get("solution") and c.cell_type == "code")
                    first.source += "\n\nimport os\nos._exit(1)  # the kernel dies here"
            (folder / rel_path.name).write_text(nbformat.writes(nb), encoding="utf-8")


# ----------------------------------------------------------------------------- timing

def _times_file() -> Path:
    from .trusted import cache_dir

    return cache_dir().parent / "demo_notebook_seconds.json"


def measured_seconds() -> dict[str, float]:
    """{"A/notebook": seconds} measured by earlier runs on this machine (solved student)."""
    try:
        return {k: float(v) for k, v in json.loads(_times_file().read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _save_seconds(new: dict[str, float]) -> None:
    if not new:
        return
    try:
        seen = measured_seconds()
        # the fastest seen: a run on a loaded machine must not inflate the next estimate
        seen.update({k: round(min(v, seen.get(k, v)), 1) for k, v in new.items()})
        _times_file().write_text(json.dumps(seen, indent=1, sort_keys=True))
    except OSError:
        pass


def notebook_names(root: Path, assignment: str, only: tuple[str, ...] | None = None) -> list[str]:
    return [p.stem for p in sorted((root / "source" / assignment).glob("*.ipynb")) if only is None or p.stem in only]


def estimate(root: Path, names: dict[str, tuple[str, ...] | None], workers: int) -> tuple[float, dict[tuple[str, str], float]]:
    """(wall seconds, {(assignment, student): seconds}) for grading `names`: per-notebook times
    (measured here before, else NOTEBOOK_SECONDS) times each student's share, scheduled
    longest first on `workers` lanes; trusted runs not cached yet, release, feedback, export."""
    from .trusted import cache_dir, fingerprint

    seen = {**NOTEBOOK_SECONDS, **measured_seconds()}
    jobs, trusted = {}, 0.0
    for a in names:
        nbt = {n: seen.get(f"{a}/{n}", DEFAULT_NOTEBOOK_SECONDS) for n in notebook_names(root, a, names[a])}
        for s in STUDENTS:
            jobs[(a, s)] = PROCESS_SECONDS + KIND_FACTOR.get(s, 1.0) * sum(nbt.values())
            if s == "s04_crash":  # re-graded per notebook after the crash
                jobs[(a, s)] += PROCESS_SECONDS * len(nbt)
        for n, t in nbt.items():
            try:
                cached = (cache_dir() / f"{fingerprint(root / 'source' / a / (n + '.ipynb'))}.json").is_file()
            except OSError:
                cached = False
            trusted += 0.0 if cached else t
    lanes = [0.0] * max(1, workers)
    for t in sorted(jobs.values(), reverse=True):
        lanes[lanes.index(min(lanes))] += t
    contention = 1.25 if workers > 1 else 1.0   # kernels and their grader share cores, caches
    wall = (max(lanes) * contention + trusted * contention / max(1, min(workers, (os.cpu_count() or 1)))
            + 4.0 * len(names) + 8.0)
    return wall, jobs


# ----------------------------------------------------------------------------- grading

_NB_LINE = re.compile(r"\b(?:Sanitizing|Autograding) (\S+\.ipynb)")


class _Progress:
    """Follows one nbgrader autograde log and says when each notebook is done."""

    def __init__(self, assignment: str, student: str, times: dict[str, float]):
        self.a, self.s, self.times = assignment, student, times
        self.nb: str | None = None
        self.t = 0.0

    def line(self, text: str) -> None:
        m = _NB_LINE.search(text)
        if m:
            name = Path(m.group(1)).stem
            if name != self.nb:
                self.finish("graded")
                self.nb, self.t = name, time.time()

    def finish(self, status: str) -> None:
        if self.nb is None:
            return
        dt = time.time() - self.t
        if status == "graded" and self.s == "s01_solved":
            self.times[f"{self.a}/{self.nb}"] = dt
        say(f"{self.s:<12} {self.a + '/' + self.nb:<36} {dt:5.1f} s  {status}")
        self.nb = None


def _why(run: parallel.StudentRun) -> str:
    """'DeadKernelError: Kernel died' from nbgrader's log (module path dropped), or the status."""
    why = re.sub(r"^(?:\w+\.)+(?=\w+:)", "", run.reason or run.status)
    return why.split(":")[0][:24]  # the error's name: the table's "Not graded" says more


def _grade(root: Path, a: str, s: str, extra: tuple[str, ...], env: dict, times: dict) -> parallel.StudentRun:
    launcher = nbgrader_cmd.command()
    prog = _Progress(a, s, times)
    run = parallel.grade_student(root, a, s, extra=extra, env=env, on_line=prog.line, launcher=launcher)
    crashed = prog.nb
    prog.finish("graded" if run.ok else f"FAILED ({_why(run)})")
    if run.ok:
        return run
    # One crashed notebook must not take the student's others down: nbgrader dropped the whole
    # assignment, so grade the others one by one (the one that crashed stays failed).
    for nb in sorted((root / "submitted" / s / a).glob("*.ipynb")):
        if nb.stem == crashed:
            continue
        prog = _Progress(a, s, {})
        r = parallel.grade_student(root, a, s, extra=(*extra, "--notebook", nb.stem), env=env,
                                   on_line=prog.line, launcher=launcher)
        prog.finish(("graded" if r.ok else f"FAILED ({_why(r)})") + " (alone)")
    return run


def grade_all(root: Path, names: dict[str, tuple[str, ...] | None], workers: int, order: dict[tuple[str, str], float]) -> list[str]:
    """Trusted runs, then every (assignment, student), `workers` at a time, longest first.
    Returns "student assignment" of the runs that failed (then re-graded per notebook)."""
    from .config import CELL_TIMEOUT_S
    from .trusted import cache_dir, fingerprint, trusted_records

    def warm(a: str, n: str) -> None:
        src = root / "source" / a / (n + ".ipynb")
        cached = (cache_dir() / f"{fingerprint(src)}.json").is_file()
        t = time.time()
        trusted_records(src, timeout=CELL_TIMEOUT_S)
        say(f"{'trusted run':<12} {a + '/' + n:<36} {time.time() - t:5.1f} s  "
            + ("cached" if cached else "ran, now cached"))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in [pool.submit(warm, a, n) for a in names for n in notebook_names(root, a, names[a])]:
            f.result()
    extras = {}
    for a in names:
        db_url = parallel.prepare(root, a, list(STUDENTS), notebook_names(root, a, names[a]))
        longer = parallel.busy_timeout_url(db_url)
        extras[a] = (f"--CourseDirectory.db_url={longer}",) if longer else ()
    env = parallel.thread_env(workers)
    times: dict[str, float] = {}
    jobs = sorted(((a, s) for a in names for s in STUDENTS), key=lambda j: -order.get(j, 0.0))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(_grade, root, a, s, extras[a], env, times): (a, s) for a, s in jobs}
        failed = [f"{futs[f][1]} {futs[f][0]}" for f in futs if not f.result().ok]
    _save_seconds(times)
    return failed


def finish(root: Path, names: list[str], workers: int) -> None:
    """generate_feedback per assignment and export, side by side."""
    def feedback(a: str) -> None:
        t = time.time()
        nbgrader("generate_feedback", a, "--force", root=root, check=False)
        say(f"{'feedback':<12} {a:<36} {time.time() - t:5.1f} s")

    def export() -> None:
        t = time.time()
        nbgrader("export", root=root)
        say(f"{'export':<12} {'grades.csv':<36} {time.time() - t:5.1f} s")

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in [pool.submit(export)] + [pool.submit(feedback, a) for a in names]:
            f.result()


# ----------------------------------------------------------------------------- the table

WIDTH = 100


def cell_text(res) -> tuple[str, list[str]]:
    """(points, notes) of one student's assignment."""
    if res.failed and len(res.failed) == len(res.notebooks):
        return "-", ["FAILED TO RUN"]
    notes = []
    if res.failed:
        notes.append("failed: " + ",".join(n.name.removesuffix(".ipynb") for n in res.failed))
    if res.pending_manual:
        notes.append(f"+{res.pending_manual:g} to grade by hand")
    return f"{res.score('tests'):g}/{res.max_score('tests'):g}", notes


def table(root: Path, names: dict[str, tuple[str, ...] | None], flags: dict[tuple[str, str], set[str]] | None = None) -> str:
    """One row per student and assignment; the notes column wraps within WIDTH columns.
    `flags`: {(student, assignment): scanner rules found}."""
    rows, details, how = [], [], set()
    for student in STUDENTS:
        for a in names:
            res = read_results(root, a, student)
            if names[a] is not None:  # the sample's notebooks of this assignment
                res.notebooks = [n for n in res.notebooks if n.name.removesuffix(".ipynb") in names[a]]
            pts, notes = cell_text(res)
            how.update(n.graded_in for n in res.notebooks if n.graded_in)
            for n in res.failed:
                details.append(f"{student} {a}/{n.name}: {' '.join(str(n.detail).split())[:240]}")
            if flags and flags.get((student, a)):
                notes.append("FLAGGED: " + ",".join(sorted(flags[(student, a)])))
            label = a if names[a] is None else a + "/" + ",".join(names[a])
            rows.append([student, label, pts, "; ".join(notes) or "-"])
    head = ["student", "assignment", "auto-graded", "notes"]
    w = [max(len(r[i]) for r in rows + [head]) for i in range(3)]
    room = max(20, WIDTH - sum(w) - 6)
    lines = ["  ".join(c.ljust(x) for c, x in zip(head[:3], w)) + "  " + head[3],
             "  ".join("-" * x for x in w) + "  " + "-" * min(room, 40)]
    last = None
    for r in rows:
        left = "  ".join(c.ljust(x) for c, x in zip([r[0] if r[0] != last else "", *r[1:3]], w))
        wrapped = textwrap.wrap(r[3], room, break_on_hyphens=False) or ["-"]
        lines.append(left + "  " + wrapped[0])
        lines += [" " * (len(left) + 2) + more for more in wrapped[1:]]
        last = r[0]
    legend = ("auto-graded: points / maximum of the auto-graded cells. 'to grade by hand': written answers "
              "waiting for an instructor (Formgrader). 'FAILED TO RUN' / 'failed:': the notebook never "
              "finished, which `nbgrader export` shows as a plain 0.")
    if flags:
        legend += (" 'FLAGGED': the scanner found code to review by hand in that student's submissions "
                   "(flags.csv); the grade is unchanged.")
    legend += " Kernels: " + (", ".join(sorted(how)) or "none ran") + "."
    out = "\n".join(lines) + "\n\n" + textwrap.fill(legend, WIDTH)
    if details:
        out += "\n\nNot graded:\n" + "\n".join(textwrap.fill(d, WIDTH, initial_indent="  ", subsequent_indent="    ")
                                               for d in details)
    return out


def files(root: Path, names: list[str]) -> str:
    from sqlalchemy.engine import make_url

    from .config import gradebook_url

    url = make_url(gradebook_url(root)).render_as_string(hide_password=True)
    if url.startswith("sqlite:///"):
        url = url.removeprefix("sqlite:///")
        url = os.path.relpath(url, root) if url.startswith(str(root)) else url
    out = [f"Files (in {root}):"]
    for path, what in (("grades.csv", "one total per student and assignment (nbgrader export)"),
                       ("grades_by_question.csv", "every cell: points or why not (failed, by hand, missing)"),
                       ("grades_by_student.csv", "per student and assignment, with failures and flags"),
                       ("flags.csv", "code the scanner wants a person to look at"),
                       (f"feedback/<student>/{names[0]}/", "feedback HTML for the students (hidden tests hidden)"),
                       (f"autograded/<student>/{names[0]}/", "graded notebooks (the Formgrader shows these)"),
                       (url, "the gradebook")):
        out.append(f"  {path:<40} {what}"[:WIDTH])
    return "\n".join(out)


# ----------------------------------------------------------------------------- main

def main(root: Path | None = None, all_assignments: bool = False, workers: int | None = None) -> int:
    root = Path(root or course_root()).resolve()
    ensure_tools_on_path()
    _T0[0] = t0 = time.time()
    workers = max(1, int(workers or os.cpu_count() or 1))
    everything = assignments(root)
    names = {a: SAMPLE[a] for a in SAMPLE if a in everything}
    if all_assignments or not names:
        names = {a: None for a in everything}
    wall, order = estimate(root, names, workers)
    what = "the whole course" if all_assignments else "a sample (`make demo-all`: the whole course)"
    print(textwrap.fill(f"Grading {len(STUDENTS)} students x {len(names)} assignments, {what}: " + ", ".join(
        a + (f" ({', '.join(only)} only)" if only else "") for a, only in names.items()), WIDTH))
    print(textwrap.fill(f"with {workers} worker(s) on {os.cpu_count()} CPUs: about {_minutes(wall)} on a quiet "
                        f"machine (from measured per-notebook times; load average now "
                        f"{os.getloadavg()[0]:.1f})", WIDTH), flush=True)
    release(root, list(names), verbose=True)
    for a, only in names.items():
        make_submissions(root, a, only)
    grade_all(root, names, workers, order)  # a failed run: FAILED, then its other notebooks "(alone)"
    finish(root, list(names), workers)
    rep = write_report(root, students=list(STUDENTS), assignments=list(names))
    say("grade report written")
    print()
    flags: dict[tuple[str, str], set[str]] = {}
    for f in rep.flags:
        flags.setdefault((f["student"], f["assignment"]), set()).add(f["rule"])
    print(table(root, names, flags))
    print()
    print(files(root, list(names)))
    print(f"\ndone in {time.time() - t0:.1f} s (estimated {wall:.0f} s)")
    return 0


def _minutes(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="python -m solutions_lib.course.demo", description=__doc__.split("\n")[0])
    p.add_argument("--all", action="store_true", help="every assignment, not the sample")
    p.add_argument("--workers", type=int)
    args = p.parse_args()
    sys.exit(main(all_assignments=args.all, workers=args.workers))
