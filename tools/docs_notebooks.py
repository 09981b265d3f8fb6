"""The theory notebooks of the student edition, executed for the documentation site.

The site (docs/site/, built by tools/build_docs.py) shows `release/<assignment>/theory.ipynb`:
the student edition, with no solutions and no hidden tests. Rendering it without outputs would
lose the plots; rendering the *solved* source notebook would leak the answers (the printed
values of the answer functions). So each release notebook is executed as a student would find
it before answering anything:

- in a plain python3 kernel whose `solutions_lib` is the grading view (reference answers
  withheld, `solutions_lib.course.withheld_view`), so no cell can print a reference value;
- cell by cell, going on after an error (an unanswered cell raises NotImplementedError, and
  the cells that use its answer fail after it);
- then every cell that failed, or printed a withheld stand-in, loses all its outputs (no
  traceback, no partial print) and shows one line saying that its output needs the student's
  answer; stderr (warnings) is dropped too. What is left is the output of cells that ran
  without any answer: the plots and tables of the theory.

An execution is cached in the cache folder with what it depended on: the notebook's bytes, the
source of every `solutions_lib` module its kernel had imported at the end (recorded by a last
cell that the build adds and removes), the withholding rules (`withheld_view.py`) and
`FORMAT`. A second build runs no kernel unless one of those changed; an edit elsewhere in the
package (another module, the grading tools) does not redo it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: bump when the filtering below changes, so that cached executions are redone
FORMAT = 1
#: seconds one cell may run (the slowest theory cells simulate a few thousand steps)
CELL_TIMEOUT = 600
#: what a cell whose output was dropped shows instead
DROPPED = ("*Output not shown: this cell needs an answer of the exercises (in the course, the "
           "student's own code runs here).*")


def release_theory(root: Path = ROOT) -> dict[str, Path]:
    """assignment -> its student-edition theory notebook, in course order."""
    return {p.parent.name: p for p in sorted((Path(root) / "release").glob("*/theory.ipynb"))}


#: the last cell the build appends: which solutions_lib modules the kernel imported
_MODULES_CELL = ("import sys as _s, json as _j\n"
                 "print('TAS-DOCS-MODULES ' + _j.dumps(sorted(m for m in _s.modules if m.split('.')[0] == 'solutions_lib')))")
_PKG = ROOT / "solutions_lib"
_ALWAYS = ("course.withheld_view", "withheld")


def _module_file(module: str) -> Path | None:
    rel = module.split(".")[1:]
    for cand in (_PKG.joinpath(*rel).with_suffix(".py") if rel else None, _PKG.joinpath(*rel, "__init__.py")):
        if cand is not None and cand.is_file():
            return cand
    return None


def cache_key(notebook: Path, modules: list[str]) -> str:
    """The key of an execution of `notebook` that imported `modules` (see the module docstring)."""
    h = hashlib.sha256()
    h.update(f"format {FORMAT}\n".encode())
    h.update(Path(notebook).read_bytes())
    for m in sorted(set(modules) | {f"solutions_lib.{a}" for a in _ALWAYS}):
        f = _module_file(m)
        h.update(f"\n{m}\n".encode())
        h.update(f.read_bytes() if f else b"<missing>")
    return h.hexdigest()[:32]


def _uses_answer(cell) -> bool:
    """Whether `cell`'s outputs show an error or a withheld reference (see the module docstring)."""
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            return True
        text = json.dumps(o.get("data", {})) + "".join(o.get("text", "") if isinstance(o.get("text"), str)
                                                       else o.get("text", []))
        if "<withheld " in text or "WithheldError" in text or "Traceback (most recent call last)" in text:
            return True
    return False


def filter_outputs(nb) -> tuple[int, int]:
    """Drop, in place, the outputs that need an answer, and stderr; (cells kept, cells dropped)."""
    kept = dropped = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        if _uses_answer(cell):
            cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": DROPPED,
                                                                           "text/plain": DROPPED})]
            dropped += 1
            continue
        cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.get("name") == "stderr")]
        kept += 1
    return kept, dropped


def execute(notebook: Path, timeout: int = CELL_TIMEOUT):
    """`notebook` executed as the module docstring says (outputs filtered); (the notebook
    node, the solutions_lib modules its kernel imported)."""
    from nbclient import NotebookClient

    from solutions_lib.course.withheld_view import build_view

    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_MODULES_CELL))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NBGRADER_EXECUTION", "MPLBACKEND")}
    env.update(PYTHONPATH=str(build_view().parent), PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory(prefix="tas-docs-") as work:
        for p in Path(notebook).parent.iterdir():     # data files a notebook reads beside it
            if p.is_file() and p.suffix != ".ipynb":
                shutil.copy2(p, Path(work) / p.name)
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                record_timing=False, shutdown_kernel="immediate",
                                resources={"metadata": {"path": work}},
                                extra_arguments=["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"])
        client.execute(env=env)      # the kernel's environment (this process's is left alone)
    last = nb.cells.pop()
    text = "".join(o.get("text", "") for o in last.outputs if o.get("output_type") == "stream")
    if "TAS-DOCS-MODULES " not in text:
        raise RuntimeError(f"{notebook}: the kernel did not finish the notebook (its last cell printed {text!r})")
    modules = json.loads(text.split("TAS-DOCS-MODULES ", 1)[1].splitlines()[0])
    filter_outputs(nb)
    return nb, modules


def _cached(notebook: Path, cache: Path):
    """(name, the cached execution of `notebook` or None when there is none or it is stale)."""
    name = f"{Path(notebook).parent.name}__{Path(notebook).stem}"
    stored = Path(cache) / f"{name}.ipynb"
    try:
        rec = json.loads((Path(cache) / f"{name}.key.json").read_text())
        if stored.is_file() and rec["key"] == cache_key(notebook, rec["modules"]):
            return name, nbformat.read(stored, as_version=4)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return name, None


def executed(notebook: Path, cache: Path, out=print):
    """`notebook` executed and filtered, from `cache` when its key matches (else run and stored)."""
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    name, nb = _cached(notebook, cache)
    if nb is not None:
        out(f"  {name}: cached")
        return nb
    stored = cache / f"{name}.ipynb"
    key_file = cache / f"{name}.key.json"
    t0 = time.monotonic()
    nb, modules = execute(notebook)
    tmp = stored.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, stored)
    key_file.write_text(json.dumps({"key": cache_key(notebook, modules), "modules": modules}) + "\n")
    kept = sum(1 for c in nb.cells if c.cell_type == "code" and not any(
        o.get("data", {}).get("text/markdown") == DROPPED for o in c.outputs))
    total = sum(1 for c in nb.cells if c.cell_type == "code")
    out(f"  {name}: executed in {time.monotonic() - t0:.0f} s, outputs kept for {kept} of {total} code cells")
    return nb


def _run_one(notebook: str, cache: str) -> str:
    lines: list[str] = []
    executed(Path(notebook), Path(cache), out=lines.append)
    return "\n".join(lines)


def executed_all(notebooks: list[Path], cache: Path, jobs: int = 1, out=print) -> list:
    """`executed` for each of `notebooks` (in order), running up to `jobs` kernels at once."""
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    todo = [nb for nb in notebooks if _cached(nb, cache)[1] is None]
    if jobs > 1 and len(todo) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for line in pool.map(_run_one, [str(p) for p in todo], [str(cache)] * len(todo)):
                out(line)
    results = []
    for nb in notebooks:
        name, node = _cached(nb, cache)
        if node is None:                 # one job: run here, in order
            node = executed(nb, cache, out=out)
        elif nb not in todo:
            out(f"  {name}: cached")
        results.append(node)
    return results
