"""Test cells the grader runs itself (issue 26): the kernel never sees them.

A *grader-side* test cell is executed in the grader's process, not in the student's kernel:
its code, its hidden tests, its inputs, its expected values and its checks exist only there.
Every name the cell uses but does not define is fetched from the kernel when the cell starts:
plain data (numbers, strings, lists, dicts, numpy arrays, torch tensors) by value, anything
else (the student's functions, classes and objects) as a `RemoteObject`, a proxy whose calls,
attribute reads and item reads are requests to the kernel (solutions_lib/_remote.py) that come
back as plain data or as new proxies. Nothing is unpickled, and no student code runs in the
grader. So a kernel can influence only what its own functions return for the inputs they are
given at that moment: it cannot replace a check, publish a record, read an expected value or
the next hidden input.

- An exception raised by the student's code is re-raised in the grader as the same builtin
  type with its message, so `expect_raises` observes the raise itself.
- Arrays and tensors sent to the kernel are mirrored (_remote.py): changes either side makes
  travel to the other after each request, so a student's optimizer that holds a parameter
  steps the grader's parameter.
- `no_delegation` and `expect_own` are the only checks that must look inside the kernel (what
  code ran, what an object is): in a grader-side cell they run there, for each call the block
  makes, and report what they saw as data (a *kernel-reported* check, docs/THREAT_MODEL.md).
- Limits: each request waits at most for what is left of the cell's time limit (then the kernel
  is interrupted and the cell fails with CellTimeoutError); a reply is at most REPLY_BYTES;
  the cell's printed output is capped at OUTPUT_BYTES.

*Which* cells run grader-side is decided once per notebook by the trusted run (trusted.py):
a test cell is a candidate when its source needs nothing that must happen inside the kernel
(`eligible`: hooks, profilers, the lab's ranks, probes, timings, `globals()` swaps stay in the
kernel, as *beside* cells), and it is kept when the instructor's solution passes it grader-side.
The decision is in the trusted-run cache entry (`grader_side`), never in the notebook.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import io
import os
import queue
import re
import time
import types

from .remote_kernel import RemoteKernel, RemoteSystemExit

#: Printed output a grader-side cell keeps.
OUTPUT_BYTES = 256 * 2**10
#: Requests to the kernel a cell may make in the trusted run and still run grader-side (each
#: costs about 2-5 ms: a test that calls the student's function at every one of a million steps
#: runs in the kernel instead). Students' runs have no such limit, only the cell's time limit.
TRUSTED_REQUESTS = 5000

#: Source that makes a test cell a *beside* cell: it needs something that happens inside the
#: student's process (a hook, a profiler, a probe, a timing, the lab's ranks, a globals() swap).
BESIDE = re.compile(
    r"(?<!swapped\()(?<!swap_for_cell\()globals\(|launch|get_ipython|probes_|Recorder|register_\w*\s*\(|hook|settrace|setprofile|"
    r"threading|CommCounter|init_process_group|dist\.(all_|reduce|broadcast|send|recv|barrier)|OneShot|\bwatch\(|__main__|sys\.modules|inspect\.|"
    r"set_num_threads|perf_counter|time\.time|timeit|process_time|tracemalloc|\bgc\.|profiler|"
    r"memory_allocated|max_memory|getrusage|DispatchMode|__torch_function__|__torch_dispatch__|FlopCounter|"
    r"CommDebugMode|tempfile|mkdtemp|TemporaryDirectory|\bopen\(|Path\(|os\.path|os\.listdir|shutil|"
    r"\w\.(no_delegation|expect_own)\b|^\s*[%!]", re.M)

def eligible(source: str) -> bool:
    """Whether a test cell may run grader-side (see the module docstring)."""
    code = "\n".join(line for line in source.split("\n") if not line.lstrip().startswith("#"))
    if BESIDE.search(code):
        return False
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def loaded_names(source: str) -> list[str]:
    """Every name the cell reads (nested functions and comprehensions included), in order."""
    seen: dict[str, None] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            seen.setdefault(node.id, None)
    return [n for n in seen if not hasattr(builtins, n)]


def imported_names(source: str) -> set[str]:
    """The names a cell binds with import statements (never fetched from the kernel)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out.add((a.asname or a.name).split(".")[0])
    return out


def stored_names(source: str) -> set[str]:
    """The names a cell binds at its top level (assignments, imports, defs, for targets...)."""
    out = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out.add((a.asname or a.name).split(".")[0])
    return out


#: Kit modules whose classes a grader-side cell builds in the kernel (the objects it passes to
#: the student's code: `TwoTowerModel(...)` is a handle; `with FakeWorld(4):` gives the kernel a
#: world of 4 ranks for an argument check); their functions stay the grader's.
REMOTE_CLASSES = ("solutions_lib.models", "solutions_lib.dist.fake_world")


def _grading_shim(kernel: RemoteKernel):
    """`solutions_lib.grading` as a grader-side cell sees it: the real checks, with
    `no_delegation` and `expect_own` run in the kernel (see the module docstring)."""
    from .. import grading as G

    shim = types.ModuleType("solutions_lib.grading")
    shim.__dict__.update({k: v for k, v in vars(G).items() if not k.startswith("__")})

    @contextlib.contextmanager
    def no_delegation(task: str, *forbidden):
        kernel.next_watch += 1
        spec = {"id": kernel.next_watch, "task": str(task), "forbidden": [kernel.encode(f) for f in forbidden]}
        watch = {"spec": spec, "problems": []}
        kernel.watches.append(watch)
        try:
            yield
        finally:
            kernel.watches.remove(watch)
        if watch["problems"]:
            raise G.DelegationError(watch["problems"][0])
        G._publish_record("own_work", task)

    def expect_own(obj, task: str, *forbidden) -> None:
        kernel.request({"op": "own", "target": kernel.encode(obj), "task": str(task),
                        "forbidden": [kernel.encode(f) for f in forbidden]})
        G._publish_record("own_work", task)

    shim.no_delegation = no_delegation
    shim.expect_own = expect_own
    return shim


def _upstream_shim(cells: "GraderSideCells"):
    """`solutions_lib.upstream` as a grader-side cell sees it: `swapped(globals(), ...)` and
    `swap_for_cell(globals(), ...)` swap the names in the kernel (where the student's answers
    call them) as well as in the cell's namespace."""
    from .. import upstream as U

    shim = types.ModuleType("solutions_lib.upstream")
    shim.__dict__.update({k: v for k, v in vars(U).items() if not k.startswith("__")})
    kernel = cells.kernel

    @contextlib.contextmanager
    def swapped(namespace: dict, **replacements):
        if namespace is not cells.ns:
            with U.swapped(namespace, **replacements):
                yield
            return
        token = kernel.request({"op": "swap", "names": {k: kernel.encode(v) for k, v in replacements.items()}})
        try:
            with U.swapped(namespace, **replacements):
                yield
        finally:
            kernel.request({"op": "unswap", "token": token})

    def swap_for_cell(namespace: dict, **replacements) -> None:
        ctx = swapped(namespace, **replacements)
        ctx.__enter__()
        cells.at_cell_end.append(ctx)

    shim.swapped = swapped
    shim.swap_for_cell = swap_for_cell
    return shim


class _RemoteClassesModule(types.ModuleType):
    """A kit module whose classes are the kernel's (REMOTE_CLASSES), fetched on first use."""

    def __init__(self, kernel: RemoteKernel, name: str):
        import importlib
        super().__init__(name)
        object.__setattr__(self, "_tas_real", importlib.import_module(name))
        object.__setattr__(self, "_tas_kernel", kernel)

    def __getattr__(self, attr):
        value = getattr(self._tas_real, attr)
        if isinstance(value, type) and value.__module__ == self._tas_real.__name__:
            value = self._tas_kernel.request({"op": "lookup", "module": self._tas_real.__name__, "qualname": attr})
        setattr(self, attr, value)
        return value


class GraderSideCells:
    """The grader's side of one notebook's grader-side test cells (one namespace per notebook)."""

    def __init__(self, connection_info: dict, timeout: float):
        self.timeout = float(timeout)
        self.out = io.StringIO()
        self.kernel = RemoteKernel(connection_info, on_stream=self._stream)
        self._reset = False
        self.at_cell_end: list = []
        self.shim = _grading_shim(self.kernel)
        self.upstream_shim = _upstream_shim(self)
        real_import = builtins.__import__
        shims = {"grading": self.shim, "upstream": self.upstream_shim}
        for mod in REMOTE_CLASSES:
            shims[mod[len("solutions_lib."):]] = _RemoteClassesModule(self.kernel, mod)
        package: dict = {}

        def _import(name, globals=None, locals=None, fromlist=(), level=0):
            found = real_import(name, globals, locals, fromlist, level)
            if level or not name.startswith("solutions_lib"):
                return found
            if fromlist and name.startswith("solutions_lib.") and name[len("solutions_lib."):] in shims:
                return shims[name[len("solutions_lib."):]]
            if getattr(found, "__name__", "") == "solutions_lib":
                # `import solutions_lib.grading as g`, `from solutions_lib import upstream`
                real = found
                if package.get("real") is not real or any(getattr(package["shim"], k, None) is not v
                                                          for k, v in vars(real).items() if k not in shims):
                    pkg = types.ModuleType("solutions_lib")
                    pkg.__dict__.update(vars(real))
                    pkg.__dict__.update({k: v for k, v in shims.items()})
                    package.update(real=real, shim=pkg)
                return package["shim"]
            return found

        b = dict(vars(builtins))
        b["__import__"] = _import
        self.ns: dict = {"__name__": "__tas_test__", "__builtins__": b}
        self.defined: set[str] = set()

    def close(self) -> None:
        self.kernel.close()

    @contextlib.contextmanager
    def _seeds_reach_the_kernel(self):
        """While a cell runs, `torch.manual_seed(s)`, `np.random.seed(s)` and `random.seed(s)`
        seed the kernel's global generator too, as they would if the cell ran there."""
        import random

        import numpy as np
        import torch

        patched = []
        for lib, mod, name in (("torch", torch, "manual_seed"), ("numpy", np.random, "seed"), ("random", random, "seed")):
            orig = getattr(mod, name)

            def seeded(*args, _orig=orig, _lib=lib, **kwargs):
                out = _orig(*args, **kwargs)
                value = args[0] if args else kwargs.get("seed", kwargs.get("a"))
                if isinstance(value, int) and not isinstance(value, bool):
                    self.kernel.request({"op": "seed", "lib": _lib, "value": int(value)})
                return out

            setattr(mod, name, seeded)
            patched.append((mod, name, orig))
        try:
            yield
        finally:
            for mod, name, orig in patched:
                setattr(mod, name, orig)

    def _stream(self, text: str) -> None:
        if self.out.tell() < OUTPUT_BYTES:
            self.out.write(text[: OUTPUT_BYTES - self.out.tell()])

    def run(self, source: str) -> tuple[list[dict], list[dict]]:
        """Run one test cell: (outputs as nbformat dicts, records)."""
        from .. import grading as G

        self.out = io.StringIO()
        records: list[dict] = []
        error = None
        self.kernel.deadline = time.monotonic() + self.timeout
        self.kernel.requests = 0
        self.kernel.budget = TRUSTED_REQUESTS if os.environ.get("TAS_TRUSTED_RUN") == "1" else None
        G.RECORD_SINK["records"] = records
        try:
            if not self._reset:
                self.kernel.request({"op": "reset"})
                self._reset = True
            imported = imported_names(source)
            need = [n for n in loaded_names(source) if n not in self.defined and n not in imported]
            if need:
                found = self.kernel.request({"op": "resolve", "names": need})
                for n in need:
                    if n in found:
                        self.ns[n] = found[n]
                    else:
                        self.ns.pop(n, None)
            code = compile(source, "<test cell>", "exec")
            with contextlib.redirect_stdout(_Capped(self)), contextlib.redirect_stderr(_Capped(self)), \
                    self._seeds_reach_the_kernel():
                exec(code, self.ns)  # noqa: S102  (the instructor's test code, in the grader)
        except BaseException as e:  # noqa: BLE001  (every failure is the cell's error output)
            if type(e) is KeyboardInterrupt:    # the grader's own interrupt
                raise
            error = e
        finally:
            while self.at_cell_end:
                try:
                    self.at_cell_end.pop().__exit__(None, None, None)
                except BaseException as e:  # noqa: BLE001
                    error = error or e
            G.RECORD_SINK.pop("records", None)
            self.defined |= stored_names(source)
        outputs = []
        text = self.out.getvalue()
        if len(text) >= OUTPUT_BYTES:
            text += "\n[... output cut by the grader]\n"
        if text:
            outputs.append({"output_type": "stream", "name": "stdout", "text": text})
        for r in records:
            from ..grading import RECORD_MIME
            outputs.append({"output_type": "display_data", "data": {RECORD_MIME: r}, "metadata": {}})
        if error is not None:
            ename = "SystemExit" if isinstance(error, RemoteSystemExit) else type(error).__name__
            evalue = str(error)
            if isinstance(error, NameError) and "is not defined" in evalue:
                from ..kernel_hints import HINT
                evalue = f"{evalue}: {HINT}"     # as the kit's hint says it in the kernel
            line = _test_line(error)
            outputs.append({"output_type": "error", "ename": ename, "evalue": evalue,
                            "traceback": [f"{ename} (test cell{', line ' + str(line) if line else ''}): {evalue}"]})
        return outputs, records


def _test_line(error: BaseException) -> int | None:
    tb, line = error.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<test cell>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class _Capped(io.TextIOBase):
    def __init__(self, cells: GraderSideCells):
        self.cells = cells

    def writable(self):
        return True

    def write(self, s):
        self.cells._stream(str(s))
        return len(s)


def _grade_id(cell) -> str | None:
    md = (cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}
    if cell.get("cell_type") == "code" and md.get("grade") and not md.get("solution"):
        return md.get("grade_id")
    return None


def enabled() -> bool:
    mode = os.environ.get("TAS_GRADER_SIDE", "on")
    if mode not in ("on", "off"):
        raise ValueError(f"TAS_GRADER_SIDE must be on or off, got {mode!r}")
    return mode == "on"


class GraderSideMixin:
    """For an nbclient executor: run the test cells named in `grader_side_ids` grader-side.

    Set `grader_side_ids` (grade ids) and `grader_side_sources` (grade id -> the trusted
    source) before executing; a cell whose source differs runs in the kernel as usual (and the
    decision step stops grading, integrity.py)."""

    grader_side_ids: frozenset = frozenset()
    grader_side_sources: dict = {}

    def _grader_cells(self) -> GraderSideCells:
        cells = getattr(self, "_tas_cells", None)
        if cells is None:
            timeout = self._get_timeout(None) or 60
            cells = self._tas_cells = GraderSideCells(self.km.get_connection_info(session=False), timeout)
        return cells

    def close_grader_side(self) -> None:
        cells = getattr(self, "_tas_cells", None)
        if cells is not None:
            cells.close()
            self._tas_cells = None

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        gid = _grade_id(cell)
        if gid is None or gid not in self.grader_side_ids or not self._same(gid, cell.source):
            return await super().async_execute_cell(cell, cell_index, execution_count=execution_count,
                                                    store_history=store_history)
        from nbformat import from_dict

        outputs, _ = self._grader_cells().run(cell.source)
        cell.outputs = [from_dict(o) for o in outputs]
        cell.setdefault("metadata", {})["tas_evaluated"] = "grader"
        await self._drain_iopub()
        return cell

    def _same(self, gid: str, source: str) -> bool:
        from .cell_source import same_source as _same_source
        want = self.grader_side_sources.get(gid)
        return want is not None and _same_source(want, source)

    async def _drain_iopub(self) -> None:
        """Drop the replies of the requests from the executor's own client's queue."""
        from nbclient.util import ensure_async
        for _ in range(100_000):
            try:
                await ensure_async(self.kc.get_iopub_msg(timeout=0))
            except queue.Empty:
                return
            except Exception:  # noqa: BLE001
                return
