"""The trusted run: the instructor's solution, executed once per notebook, outside any
student's kernel, to learn what each test cell must check and the values it must find.

The grader (integrity.py) decides a student's test cell from facts the student's kernel cannot
fake: which checks the cell must run come from here, not from the kernel, and every value the
kernel reports is compared with the expected value recorded here. At grading time the
reference answers are withheld from the student's kernel (withheld_view.py), so the expected
values of the hidden tests exist only in this run.

The run executes `source/<assignment>/<notebook>.ipynb` (solutions and hidden tests) top to
bottom in a plain kernel with `NBGRADER_EXECUTION=autograde` and `TAS_TRUSTED_RUN=1`, with the
same seeds as every student's run, and keeps, per test cell (by grade id), the records its
checks published (`solutions_lib.grading.RECORD_MIME`). Every cell must run without an error:
a solution that fails its own tests is the instructor's bug and stops grading with a message.

Cost: one execution per notebook, cached by a fingerprint of the source notebook, the
`solutions_lib` sources and the Python/numpy/torch versions, in `$TAS_TRUSTED_CACHE`
(default `~/.cache/training-at-scale/trusted`, mode 0700), shared by the course, the
self-check and parallel graders (a file lock makes one of them run it, the others wait). Each
entry carries an HMAC with the grader's key (`trusted.key`, 0600, beside the cache): an entry
changed by anyone else stops grading with a message (issue 26).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..grading import RECORD_MIME

#: Bumped when the records' meaning changes, so old caches are not reused.
FORMAT = 4
KEY_FILE = "trusted.key"
_PACKAGE = Path(__file__).resolve().parent.parent


class TrustedRunError(RuntimeError):
    """The instructor's solution did not run cleanly; grading cannot proceed."""


def cache_dir() -> Path:
    d = Path(os.environ.get("TAS_TRUSTED_CACHE") or Path.home() / ".cache" / "training-at-scale" / "trusted")
    d.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(d, 0o700)
    except OSError:
        pass
    return d


def _key() -> bytes:
    """The grader's key for the cache entries' HMAC: 32 random bytes in a 0600 file beside the
    cache (`$TAS_TRUSTED_CACHE/../trusted.key`), made on first use. A sandboxed kernel sees
    neither this file nor the cache (private $HOME, course root hidden)."""
    d = cache_dir().parent
    path = d / KEY_FILE
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = b""
    if len(key) != 32:
        fd = os.open(str(path) + f".{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        try:
            os.link(str(path) + f".{os.getpid()}", path)     # first writer wins
        except FileExistsError:
            pass
        os.unlink(str(path) + f".{os.getpid()}")
        key = path.read_bytes()
    st = os.stat(path)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise TrustedRunError(f"{path}: the trusted cache's key must be the grader's own file, mode 0600")
    return key


def _mac(entry: dict) -> str:
    import hmac
    return hmac.new(_key(), json.dumps(entry, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def _read_entry(path: Path) -> dict | None:
    """The cache entry at `path`: None when absent or of an older format (run again);
    TrustedRunError when its HMAC does not match (changed after the grader wrote it)."""
    import hmac
    try:
        wrapped = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(wrapped, dict) or wrapped.get("format") != FORMAT:
        return None
    entry, mac = wrapped.get("entry"), wrapped.get("mac")
    if not isinstance(entry, dict) or not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(entry)):
        raise TrustedRunError(f"{path}: this trusted-run cache entry was changed after the grader wrote it; "
                              "grading stops (delete the file to run the instructor's solution again, and find out "
                              "who could write to the cache)")
    return entry


_LIB_HASH: str | None = None


def _library_hash() -> str:
    global _LIB_HASH
    if _LIB_HASH is None:
        h = hashlib.sha256()
        for p in sorted(_PACKAGE.rglob("*.py")):
            h.update(str(p.relative_to(_PACKAGE)).encode())
            h.update(p.read_bytes())
        _LIB_HASH = h.hexdigest()
    return _LIB_HASH


def fingerprint(source_nb: Path) -> str:
    import numpy

    h = hashlib.sha256()
    h.update(f"format {FORMAT}\n".encode())
    h.update(f"term {os.environ.get('TAS_TERM_SEED', '')}\n".encode())   # a new term's secret: a new run
    h.update(f"grader side {os.environ.get('TAS_GRADER_SIDE', 'on')}\n".encode())
    h.update(Path(source_nb).read_bytes())
    h.update(_library_hash().encode())
    versions = [sys.version, numpy.__version__]
    try:
        from importlib.metadata import version
        versions.append(version("torch"))
    except Exception:  # noqa: BLE001
        versions.append("no torch")
    h.update("\n".join(versions).encode())
    return h.hexdigest()[:32]


def records_of(cell) -> list[dict]:
    return [o["data"][RECORD_MIME] for o in cell.get("outputs", [])
            if o.get("output_type") == "display_data" and isinstance(o.get("data"), dict)
            and isinstance(o["data"].get(RECORD_MIME), dict)]


def _is_test_cell(cell) -> bool:
    md = (cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}
    return cell.get("cell_type") == "code" and bool(md.get("grade")) and not md.get("solution")


def run_in(nb, workdir: Path, env: dict, timeout: int, grader_side: dict | None = None) -> None:
    """Execute `nb` in place in a plain python3 kernel in `workdir`, with exactly `env` as the
    environment (errors kept in the outputs; a cell timeout raises). The test cells named in
    `grader_side` (grade id -> source) run grader-side (grader_side.py)."""
    from nbclient import NotebookClient
    from nbclient.util import run_sync

    from .grader_side import GraderSideMixin

    class Client(GraderSideMixin, NotebookClient):
        execute_cell = run_sync(GraderSideMixin.async_execute_cell)

    client = Client(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                    resources={"metadata": {"path": str(workdir)}}, shutdown_kernel="immediate",
                    extra_arguments=["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"])
    client.grader_side_ids = frozenset(grader_side or ())
    client.grader_side_sources = dict(grader_side or {})
    client.km = client.create_kernel_manager()
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        client.execute()
    finally:
        client.close_grader_side()
        os.environ.clear()
        os.environ.update(old)


def _arguments(source: str) -> set[str]:
    import ast
    return {a.arg for a in ast.walk(ast.parse(source)) if isinstance(a, ast.arg)}


def grader_side_candidates(nb) -> dict:
    """grade id -> source of the test cells that may run grader-side (grader_side.eligible),
    less those that bind a name a later cell run in the kernel reads."""
    from .grader_side import eligible, enabled, loaded_names, stored_names

    if not enabled():
        return {}
    cells = [c for c in nb.cells if c.get("cell_type") == "code"]
    cand = {}
    for c in cells:
        gid = ((c.get("metadata", {}) or {}).get("nbgrader", {}) or {}).get("grade_id")
        if _is_test_cell(c) and gid and eligible(c.source):
            cand[gid] = c.source
    def gid_of(c):
        return ((c.get("metadata", {}) or {}).get("nbgrader", {}) or {}).get("grade_id")

    changed = True
    while changed:
        changed = False
        kernel_bound = set()   # names the kernel binds itself somewhere (its own imports, answers...)
        for c in cells:
            if gid_of(c) not in cand:
                try:
                    kernel_bound |= stored_names(c.source)
                except SyntaxError:
                    pass
        for i, c in enumerate(cells):
            gid = gid_of(c)
            if gid not in cand:
                continue
            try:
                bound = stored_names(c.source) - kernel_bound
            except SyntaxError:
                bound = set()
            for later in cells[i + 1:]:
                lgid = ((later.get("metadata", {}) or {}).get("nbgrader", {}) or {}).get("grade_id")
                if lgid in cand:
                    continue
                try:   # a name the later cell binds itself is its own (`except E as e`, loop variables)
                    reads = set(loaded_names(later.source)) - stored_names(later.source) - _arguments(later.source)
                except SyntaxError:
                    reads = set()
                if reads & bound:
                    del cand[gid]
                    changed = True
                    break
    return cand


def _run_once(source_nb: Path, timeout: int, env: dict, grader_side: dict):
    import nbformat

    nb = nbformat.read(source_nb, as_version=4)
    work = Path(tempfile.mkdtemp(prefix="tas-trusted-"))
    try:
        for p in source_nb.parent.iterdir():
            if p.suffix != ".ipynb" and p.is_file() and not p.is_symlink():
                shutil.copy2(p, work / p.name)
        try:
            run_in(nb, work, env, timeout, grader_side)
        except Exception as e:  # noqa: BLE001  (a cell timeout, a dead kernel: name the cell)
            from nbclient.exceptions import CellTimeoutError

            # the running cell is the last one the kernel announced (execute_input sets its count)
            cell = next((c for c in reversed(nb.cells) if c.get("cell_type") == "code" and c.get("execution_count")), None)
            gid = "?" if cell is None else ((cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}).get(
                "grade_id", f"number {nb.cells.index(cell)}")
            kind = "timed out" if isinstance(e, CellTimeoutError) else f"stopped ({type(e).__name__})"
            raise TrustedRunError(f"{source_nb}: the trusted run {kind} in cell {gid} (cell limit {timeout} s): "
                                  f"{str(e)[:300]}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return nb


def execute(source_nb: Path, timeout: int) -> dict:
    """Run `source_nb` as described in the module docstring; returns the cache entry.

    The test cells that may run grader-side (`grader_side_candidates`) run so; a candidate that
    fails there with the instructor's solution runs in the kernel instead, and the notebook is
    run again, so the records come from exactly the run every student's notebook gets."""
    source_nb = Path(source_nb).resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TAS_TRUSTED_CACHE")}
    env.update(NBGRADER_EXECUTION="autograde", TAS_TRUSTED_RUN="1", PYTHONHASHSEED="0")
    import nbformat

    grader_side = grader_side_candidates(nbformat.read(source_nb, as_version=4))
    why_kernel: dict[str, str] = {}
    for attempt in range(4):
        nb = _run_once(source_nb, timeout, env, grader_side)
        failed = set()
        for cell in nb.cells:
            gid = ((cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}).get("grade_id")
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if errors:
                failed.add(gid)
                if gid in grader_side:
                    why_kernel[gid] = f"{errors[0].get('ename')}: {str(errors[0].get('evalue'))[:300]}"
        if not failed:
            break
        moved = failed & set(grader_side)
        if moved and attempt < 2:
            grader_side = {g: s for g, s in grader_side.items() if g not in moved}
        elif grader_side:
            grader_side = {}   # a kernel cell failed after grader-side ones: none grader-side
        else:
            break
    cells: dict[str, dict] = {}
    for i, cell in enumerate(nb.cells):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        gid = ((cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}).get("grade_id", f"cell {i}")
        if errors:
            e = errors[0]
            raise TrustedRunError(f"{source_nb}: the instructor's solution fails in cell {gid}: "
                                  f"{e.get('ename')}: {str(e.get('evalue'))[:500]}")
        if _is_test_cell(cell):
            cells[gid] = {"source": cell.source, "records": records_of(cell),
                          "where": "grader" if gid in grader_side else "kernel"}
    return {"format": FORMAT, "notebook": str(source_nb), "cells": cells, "grader_side": sorted(grader_side),
            "why_kernel": why_kernel}


#: The trusted run's cell limit is this many times the students' (at least TRUSTED_MIN_TIMEOUT_S):
#: it runs once per notebook for the whole class, so a loaded machine must not fail it, and a
#: run that still times out is tried once more with twice the limit before grading stops.
TRUSTED_TIMEOUT_FACTOR = 5
TRUSTED_MIN_TIMEOUT_S = 300


def trusted_records(source_nb: Path, timeout: int = 60) -> dict:
    """The cache entry for `source_nb` (running it first when it is not cached yet):
    {"cells": {grade_id: {"source": ..., "records": [...]}}}. `timeout` is the students' cell
    limit; the trusted run gets TRUSTED_TIMEOUT_FACTOR times as much (see above)."""
    source_nb = Path(source_nb)
    if not source_nb.is_file():
        raise TrustedRunError(f"no source notebook {source_nb}: the grader needs the instructor's solution")
    key = fingerprint(source_nb)
    d = cache_dir()
    path = d / f"{key}.json"
    with open(d / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entry = _read_entry(path)
        if entry is not None:
            return entry
        tmp = d / f"{key}.{os.getpid()}.tmp"
        limit = max(int(timeout) * TRUSTED_TIMEOUT_FACTOR, TRUSTED_MIN_TIMEOUT_S)
        for attempt in range(2):
            p = subprocess.run([sys.executable, "-m", "solutions_lib.course.trusted", str(source_nb), str(tmp),
                                str(limit)], capture_output=True, text=True)
            if p.returncode == 0 or "timed out" not in p.stderr:
                break
            limit *= 2
        if p.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            raise TrustedRunError(f"the trusted run of {source_nb} failed:\n{p.stderr[-3000:]}")
        entry = json.loads(tmp.read_text())
        tmp.write_text(json.dumps({"format": FORMAT, "entry": entry, "mac": _mac(entry)}))
        os.replace(tmp, path)
        _prune(d)
        return entry


def _prune(d: Path, days: float = 30.0) -> None:
    """Drop cache entries not written for `days` (older library versions, old notebooks)."""
    import time
    cutoff = time.time() - days * 86400
    for f in d.glob("*.json"):
        try:
            if f.stat().st_mtime < cutoff:
                f.unlink()
                f.with_suffix(".lock").unlink(missing_ok=True)
        except OSError:
            pass


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 3:
        print("usage: python -m solutions_lib.course.trusted SOURCE.ipynb OUT.json TIMEOUT", file=sys.stderr)
        return 2
    try:
        entry = execute(Path(argv[0]), int(argv[2]))
    except TrustedRunError as e:
        print(str(e), file=sys.stderr)
        return 1
    Path(argv[1]).write_text(json.dumps(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
