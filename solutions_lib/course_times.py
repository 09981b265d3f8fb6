"""How long each solved notebook takes to run, against the course's time budget.

`bench_notebook_times()` executes every solved source notebook (`source/<assignment>/*.ipynb`:
solutions and hidden tests in place, as the trusted run executes them) top to bottom in a plain
`python3` kernel of the repository's venv with nbclient, one notebook at a time in a throw-away
copy of its assignment folder, and prints the seconds per notebook (kernel start and shutdown
included), its slowest cells, and the total, against the budget: 30 s per notebook on a 2-core
machine and 6 minutes for the whole course. Notebooks with a budget of their own
(`OWN_BUDGET_S`, e.g. the capstone) are held to it instead.

Running the whole course takes many minutes: restrict it with `assignments=` (names or
prefixes, "06" or "06_compute_scaling") and `only=` (substrings of notebook names).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_BUDGET_S = 30.0
COURSE_BUDGET_S = 360.0
#: notebooks allowed more than NOTEBOOK_BUDGET_S (issue 28: the capstone may take 3 minutes)
OWN_BUDGET_S = {"13_capstone/": 180.0}
CELL_TIMEOUT_S = 600


def _budget(assignment: str, name: str) -> float:
    key = f"{assignment}/{name}"
    for prefix, s in OWN_BUDGET_S.items():
        if key.startswith(prefix):
            return s
    return NOTEBOOK_BUDGET_S


def course_notebooks(assignments=None, only=None, root: Path = ROOT) -> list[Path]:
    """The source notebooks, optionally restricted (assignment names or prefixes; notebook
    name substrings), in course order."""
    if isinstance(assignments, str):
        assignments = [a for a in assignments.split(",") if a]
    if isinstance(only, str):
        only = [o for o in only.split(",") if o]
    out = []
    for a in sorted(p for p in (root / "source").iterdir() if p.is_dir()):
        if assignments and not any(a.name == x or a.name.startswith(x) for x in assignments):
            continue
        for nb in sorted(a.glob("*.ipynb")):
            if only and not any(o in nb.name for o in only):
                continue
            out.append(nb)
    return out


def _cell_seconds(cell) -> float | None:
    ex = (cell.get("metadata", {}) or {}).get("execution", {}) or {}
    t0, t1 = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not (t0 and t1):
        return None
    return (datetime.fromisoformat(t1.replace("Z", "+00:00")) -
            datetime.fromisoformat(t0.replace("Z", "+00:00"))).total_seconds()


def time_notebook(path: Path, timeout: int = CELL_TIMEOUT_S) -> dict:
    """Run one solved source notebook top to bottom in a plain python3 kernel (a copy of its
    folder as the working directory, errors kept); returns the wall seconds, the cells' seconds
    (label -> s) and the errors (labels of cells that raised)."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    work = Path(tempfile.mkdtemp(prefix="tas-times-"))
    try:
        for p in path.parent.iterdir():
            if p.suffix != ".ipynb" and p.is_file() and not p.is_symlink():
                shutil.copy2(p, work / p.name)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
        env.setdefault("PYTHONHASHSEED", "0")
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True, record_timing=True,
                                resources={"metadata": {"path": str(work)}}, shutdown_kernel="immediate",
                                extra_arguments=["--HistoryManager.hist_file=:memory:",
                                                 "--IPKernelApp.log_level=ERROR"])
        old = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        t = time.perf_counter()
        try:
            client.execute()
        finally:
            wall = time.perf_counter() - t
            os.environ.clear()
            os.environ.update(old)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cells, errors = {}, []
    for i, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        gid = ((cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}).get("grade_id")
        label = gid or f"cell {i}"
        s = _cell_seconds(cell)
        if s is not None:
            cells[label] = s
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            errors.append(label)
    return {"wall": wall, "cells": cells, "errors": errors}


def bench_notebook_times(out=print, assignments=None, only=None, slowest: int = 3) -> bool:
    """Seconds per solved notebook (plain kernel, 2 cores in the course's budget) and the total;
    True when every notebook is within its budget, none raised, and (for the whole course) the
    total is within COURSE_BUDGET_S. `assignments`/`only` restrict the run (see module doc)."""
    paths = course_notebooks(assignments, only)
    if not paths:
        out("notebook times: no notebook matched")
        return False
    whole = not assignments and not only
    ok, total = True, 0.0
    out(f"notebook times: {len(paths)} solved notebook(s), plain python3 kernel, {os.cpu_count()} cores "
        f"(budget {NOTEBOOK_BUDGET_S:.0f} s each, {COURSE_BUDGET_S / 60:.0f} min for the course)")
    for p in paths:
        a = p.parent.name
        budget = _budget(a, p.name)
        r = time_notebook(p)
        total += r["wall"]
        slow = sorted(r["cells"].items(), key=lambda kv: -kv[1])[:slowest]
        verdict = "ok" if r["wall"] <= budget else f"OVER {budget:.0f} s"
        if r["errors"]:
            verdict += f", {len(r['errors'])} cell(s) raised: {', '.join(r['errors'][:5])}"
        ok = ok and r["wall"] <= budget and not r["errors"]
        out(f"  {a}/{p.name}: {r['wall']:6.1f} s  {verdict}  (slowest: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in slow) + ")")
    line = f"notebook times: total {total:.1f} s"
    if whole:
        line += f" against {COURSE_BUDGET_S:.0f} s: " + ("ok" if total <= COURSE_BUDGET_S else "OVER")
        ok = ok and total <= COURSE_BUDGET_S
    else:
        line += " (a subset: the course total is not judged)"
    out(line)
    return ok


if __name__ == "__main__":  # python -m solutions_lib.course_times [assignments] [only]
    import sys

    sys.exit(0 if bench_notebook_times(assignments=sys.argv[1] if len(sys.argv) > 1 else None,
                                       only=sys.argv[2] if len(sys.argv) > 2 else None) else 1)
