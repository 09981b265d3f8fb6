"""`bench class`: student-notebooks per second per worker on the Dask engine, and what a term costs.

A small class of the course's own fastest assignment (BENCH_ASSIGNMENT, solved students) is
graded in a temporary copy of the course by `engine.grade_class` on an embedded LocalCluster.
The rate is measured on the workers (seconds per student-notebook, the median of the tasks:
the first task of each worker also builds its template course and trusted runs), and the
projection for 150 students x every assignment of the course scales it by the course's own notebook mix:
the mean graded seconds of all notebooks (demo.NOTEBOOK_SECONDS, or this machine's measured
ones) over those of the bench notebooks. Workers are assumed to have cores of their own
(one Dask worker per core or two): on one 2-core machine more than 2 workers add nothing.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

BENCH_ASSIGNMENT = "05_communication"
STUDENTS = 3
TERM_STUDENTS = 150
PROJECT_WORKERS = (1, 2, 4, 8)


def _notebook_seconds(root: Path) -> dict[str, float]:
    from .demo import DEFAULT_NOTEBOOK_SECONDS, NOTEBOOK_SECONDS, measured_seconds
    from .paths import source_notebooks

    seen = {**NOTEBOOK_SECONDS, **measured_seconds()}
    return {f"{p.parent.name}/{p.stem}": seen.get(f"{p.parent.name}/{p.stem}", DEFAULT_NOTEBOOK_SECONDS)
            for p in source_notebooks(root)}


def projection(sec_per_notebook: float, root: Path, bench_notebooks: list[str]) -> tuple[int, int, float, dict[int, float]]:
    """(assignments, notebooks per student per term: the whole course, weighted seconds per
    notebook, {workers: hours})."""
    times = _notebook_seconds(root)
    assignments = len({k.split("/")[0] for k in times})
    bench_mean = statistics.mean(times[f"{BENCH_ASSIGNMENT}/{n}"] for n in bench_notebooks)
    weighted = sec_per_notebook * statistics.mean(times.values()) / bench_mean
    total = TERM_STUDENTS * len(times) * weighted
    return assignments, len(times), weighted, {w: total / w / 3600 for w in PROJECT_WORKERS}


def bench_class(out: Callable[[str], None] = print, workers: int | None = None) -> bool:
    """Grade a small class on the engine, print the rate and the projection; True when every
    notebook was graded and the solved students got full auto marks."""
    from . import notebooks as nbs
    from .engine import grade_class
    from .grader import Course, make_course, read_results, solved_version
    from .paths import course_root

    root = course_root()
    workers = workers or min(2, os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="tas-bench-class-") as tmp:
        dest = make_course(Path(tmp) / "course", [BENCH_ASSIGNMENT], root)
        (dest / "nbgrader_config.py").write_text((root / "nbgrader_config.py").read_text())
        course = Course(dest)
        course.generate(BENCH_ASSIGNMENT)
        names = sorted(p.name for p in (dest / "release" / BENCH_ASSIGNMENT).glob("*.ipynb"))
        solved = {n: solved_version(course.release_notebook(BENCH_ASSIGNMENT, n),
                                    nbs.read(dest / "source" / BENCH_ASSIGNMENT / n)) for n in names}
        for i in range(STUDENTS):
            course.submit(f"bench{i:02d}", BENCH_ASSIGNMENT, solved)
        out(f"bench class: {STUDENTS} solved students x {len(names)} notebooks of {BENCH_ASSIGNMENT} "
            f"on a LocalCluster of {workers} worker(s)")
        t0 = time.perf_counter()
        run = grade_class(dest, BENCH_ASSIGNMENT, workers=workers, out=out)
        wall = time.perf_counter() - t0
        from .engine_feedback import feedback_class
        t1 = time.perf_counter()
        fb = feedback_class(dest, BENCH_ASSIGNMENT, workers=workers, out=out)
        fb_wall = time.perf_counter() - t1
        lost = []   # what a solved student lost, and why (read before the course is deleted)
        for s in sorted({r.student for r in run.runs}):
            for nb in read_results(dest, BENCH_ASSIGNMENT, s).notebooks:
                lost += [f"{s}/{nb.name} {c.grade_id}: {'; '.join(c.messages)[:160] or nb.detail}"
                         for c in nb.cells if c.kind == "tests" and c.status == "fail"]
    graded = [r for r in run.runs if r.status == "graded"]
    ok = len(graded) == STUDENTS * len(names) and all(r.score >= r.max_score for r in graded)
    if not graded:
        out("no notebook was graded: no rate to report")
        return False
    med = statistics.median(r.seconds for r in graded)
    out(f"  {len(graded)} student-notebooks in {wall:.1f} s wall (cluster start, preflight, templates included)")
    out(f"  per task on a worker: median {med:.1f} s, min {min(r.seconds for r in graded):.1f} s, "
        f"max {max(r.seconds for r in graded):.1f} s")
    out(f"  rate: {1 / med:.3f} student-notebooks per second per worker (steady state); "
        f"{len(graded) / wall / workers:.3f} over the whole run")
    done = [r for r in fb.runs if r.status == "done"]
    if done:
        fmed = statistics.median(r.seconds for r in done)
        out(f"  feedback on the engine: {len(done)} students ({len(done) * len(names)} notebooks) in {fb_wall:.1f} s "
            f"wall; per student on a worker: median {fmed:.1f} s ({fmed / len(names):.1f} s per notebook)")
    ok = ok and fb.ok and len(done) == STUDENTS
    n_assignments, per_student, weighted, hours = projection(med, root, [n[:-6] for n in names])
    out(f"  projected term: {TERM_STUDENTS} students x {n_assignments} assignments "
        f"({per_student} notebooks per student, {weighted:.1f} s per notebook weighted by the course's mix):")
    for w, h in hours.items():
        out(f"    {w} worker(s): {h:6.1f} h")
    out(f"  load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a shared machine inflates the rate)")
    if not ok:
        out("  FAILED: not every bench notebook was graded to full auto marks, or a student's feedback failed")
        for r in fb.runs:
            if r.status != "done":
                out(f"    feedback {r.student}: {r.status}: {r.reason}")
        for line in lost:
            out(f"    {line}")
        for r in run.runs:
            if r.status != "graded":
                out(f"    {r.student}/{r.notebook}: {r.status}: {r.reason}")
    return ok
