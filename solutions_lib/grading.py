"""Helpers for the notebooks' test cells: comparisons with messages a student can act on,
and guards that make sure a build-it answer is the student's own work.

Every check raises `GradingError` (an AssertionError) whose message says what was checked,
what was expected, what came back, and, where given, a hint about the usual mistake.

Against a submission that tampers with the kernel it runs in (docs/THREAT_MODEL.md):
- values are read through the base types' own slots before they are compared (`plain`,
  `as_float_array`): a student object or subclass whose `__eq__`, `__float__`, `__int__` or
  `__iter__` lies is compared by what it holds, not by what it says;
- while `nbgrader autograde` runs (NBGRADER_EXECUTION=autograde), every check that passes
  leaves a *check record* in the cell's outputs (MIME type `RECORD_MIME`: what was checked,
  the values when they are small, the tolerance). The grader process, outside the kernel,
  recomputes each comparison and fails a test cell whose checks left no record or a record
  that does not hold (`solutions_lib.course.integrity`): a test cell that was emptied,
  skipped, whose helpers were replaced by no-ops or whose numpy was patched scores zero and
  is flagged for review.
"""
from __future__ import annotations

import inspect
import os
import sys
import threading
import types
from contextlib import contextmanager
from pathlib import Path

import numpy as np


#: MIME type of the check records read by the grader (solutions_lib.course.integrity).
RECORD_MIME = "application/vnd.tas.check+json"
#: Arrays up to this many entries are recorded in full and re-compared by the grader.
RECORD_MAX_VALUES = 256
_IMPORT_PID = os.getpid()


def _publish_record(kind: str, what: str, **data) -> None:
    """Leave a check record in the running cell's outputs, during autograde only.

    Not from processes forked off the kernel (their display messages would corrupt the
    kernel's sockets); not outside IPython.
    """
    if os.environ.get("NBGRADER_EXECUTION") != "autograde" or os.getpid() != _IMPORT_PID:
        return
    ipython = sys.modules.get("IPython.core.interactiveshell")
    if ipython is None or not ipython.InteractiveShell.initialized():
        return
    from IPython.display import publish_display_data

    publish_display_data({RECORD_MIME: {"kind": kind, "what": str(what)[:200], **data}})


def plain(x):
    """`x` as builtin values, read through the base types' own slots.

    An int, float or str subclass becomes the exact builtin it holds (its own `__int__`,
    `__float__`, `__eq__` are not consulted); a tuple/list/dict subclass is walked with the
    base type's iterator; a numpy scalar becomes the Python scalar it stores; a 0-d numpy
    array its scalar. Anything else is returned as is (and compared by exact type).
    """
    t = type(x)
    if x is None or t in (bool, int, float, str, complex):
        return x
    if isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):
        return plain(np.array(x, subok=False).item())
    if isinstance(x, int):
        return int.__int__(x)
    if isinstance(x, float):
        return float.__float__(x)
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, tuple):
        return tuple(plain(v) for v in tuple.__iter__(x))
    if isinstance(x, list):
        return [plain(v) for v in list.__iter__(x)]
    if isinstance(x, dict):
        return {plain(k): plain(v) for k, v in dict.items(x)}
    return x


def _jsonable(x, limit: int = 2000):
    """`x` for a check record when it is small plain JSON data, else None."""
    import json

    try:
        text = json.dumps(x, allow_nan=True)
    except (TypeError, ValueError):
        return None
    return x if len(text) <= limit else None


class GradingError(AssertionError):
    """A test of a student's answer failed; the message explains why."""


class DelegationError(GradingError):
    """A build-it answer called the reference implementation it was asked to build."""


def _fmt(x) -> str:
    a = np.asarray(x)
    if a.ndim == 0:
        return f"{float(a):.8g}"
    return np.array2string(a, precision=6, threshold=12)


def as_float_array(got, what: str) -> np.ndarray:
    """`got` as a float64 array; a value that is not numeric fails with a clear message."""
    if got is None:
        raise GradingError(f"{what}: got None. Did your function forget to `return` its result?")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(got, torch.Tensor):
        # as the base class, so a subclass's __torch_function__ cannot change what is read
        got = torch.Tensor.as_subclass(got, torch.Tensor).detach().cpu().double().numpy()
    got = plain(got) if not isinstance(got, np.ndarray) else got
    try:
        arr = np.array(got, dtype=np.float64, subok=False)
    except (TypeError, ValueError):
        raise GradingError(f"{what}: expected a number or an array of numbers, got {type(got).__name__} {got!r:.80}") from None
    return arr


def expect_close(got, expected, what: str, *, rtol: float = 1e-6, atol: float = 0.0,
                 unit: str = "", hint: str = "") -> None:
    """Check that number/array `got` equals `expected` within |got-exp| <= atol + rtol*|exp|."""
    g = as_float_array(got, what)
    e = np.asarray(expected, dtype=np.float64)
    u = f" {unit}" if unit else ""
    tip = f" {hint}" if hint else ""
    if g.shape != e.shape:
        raise GradingError(f"{what}: expected shape {e.shape}, got shape {g.shape}.{tip}")
    if not np.all(np.isfinite(g)):
        raise GradingError(f"{what}: got a non-finite value ({_fmt(g)}); expected {_fmt(e)}{u}.{tip}")
    err = np.abs(g - e)
    bad = err > atol + rtol * np.abs(e)
    if np.any(bad):
        if g.ndim == 0:
            rel = float(err) / abs(float(e)) if float(e) != 0 else float("inf")
            raise GradingError(f"{what}: expected {_fmt(e)}{u}, got {_fmt(g)}{u} "
                               f"(relative error {rel:.2e}, allowed {rtol:.0e}).{tip}")
        idx = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), g.shape)
        raise GradingError(f"{what}: {int(bad.sum())} of {g.size} entries differ; at index {tuple(int(i) for i in idx)} "
                           f"expected {_fmt(e[idx])}{u}, got {_fmt(g[idx])}{u}.{tip}")
    small = g.size <= RECORD_MAX_VALUES
    _publish_record("close", what, rtol=float(rtol), atol=float(atol), shape=list(g.shape),
                    got=g.tolist() if small else None, expected=e.tolist() if small else None)


def expect_equal(got, expected, what: str, hint: str = "") -> None:
    """Exact equality for ints, strings, tuples, shapes: same type (numpy ints count as int,
    a tuple subclass such as torch.Size as a tuple) and equal values, read with `plain`."""
    g, e = plain(got), plain(expected)
    if not (type(g) is type(e) and g == e):
        tip = f" {hint}" if hint else ""
        raise GradingError(f"{what}: expected {expected!r}, got {got!r}.{tip}")
    _publish_record("equal", what, got=_jsonable(g), expected=_jsonable(e))


def expect_true(condition, message: str) -> None:
    """Fail with `message` unless `condition` holds (a bool, numpy bool or 1-element tensor)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(condition, torch.Tensor):
        condition = as_float_array(condition, message).item() != 0
    c = plain(condition)
    if not (c if type(c) is bool else bool(condition)):
        raise GradingError(message)
    _publish_record("true", message)


def expect_raises(fn, exc_type, what: str, hint: str = "") -> None:
    """Check that `fn()` raises `exc_type` (bad input must raise, not return a number)."""
    try:
        result = fn()
    except exc_type:
        _publish_record("raises", what)
        return
    except Exception as e:  # noqa: BLE001  (any other exception is the student's bug to see)
        raise GradingError(f"{what}: expected {exc_type.__name__}, got {type(e).__name__}: {e}. {hint}".rstrip()) from None
    raise GradingError(f"{what}: expected {exc_type.__name__}, but it returned {result!r:.80}. {hint}".rstrip())


# ---------------------------------------------------------------- anti-delegation


def _code_objects(obj) -> set:
    codes = set()
    if isinstance(obj, type):
        for attr in vars(obj).values():
            codes |= _code_objects(getattr(attr, "__func__", attr)) if callable(attr) or isinstance(attr, (staticmethod, classmethod)) else set()
        return codes
    # Only the innermost function of a decorator chain: decorator wrappers are often shared
    # (every torch optimizer's `step` runs the same `_use_grad` wrapper), and the inner
    # function runs whenever the wrapper is called.
    seen = 0
    while hasattr(obj, "__wrapped__") and seen < 10:
        obj = obj.__wrapped__
        seen += 1
    return codes | _code_objects_of_function(obj)


def _code_objects_of_function(fn) -> set:
    code = getattr(fn, "__code__", None)
    return {code} if isinstance(code, types.CodeType) else set()


def _describe(obj) -> str:
    mod = getattr(obj, "__module__", None) or getattr(obj, "__name__", "")
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(obj))
    return name if isinstance(obj, types.ModuleType) else f"{mod}.{name}"


@contextmanager
def no_delegation(task: str, *forbidden):
    """Run the block and fail if it executes any forbidden code.

    `forbidden` items are modules (any function defined in that module's file), classes (their
    methods) or functions (also through `functools.wraps` wrappers). Detection follows every
    Python call in the block, so aliases, wrappers, subclasses and calls caught by a bare
    `except` are all seen; the error is raised when the block ends.
    """
    files: dict[str, str] = {}
    codes: dict[types.CodeType, str] = {}
    for obj in forbidden:
        if isinstance(obj, types.ModuleType):
            f = getattr(obj, "__file__", None)
            if f:
                files[str(Path(f).resolve())] = _describe(obj)
        else:
            for c in _code_objects(obj):
                codes[c] = _describe(obj)
    hits: list[str] = []
    file_cache: dict[str, str | None] = {}

    def _resolve(fname: str):
        if fname not in file_cache:
            try:
                file_cache[fname] = files.get(str(Path(fname).resolve()))
            except (OSError, ValueError):
                file_cache[fname] = None
        return file_cache[fname]

    def profiler(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        name = codes.get(code) or (_resolve(code.co_filename) if files else None)
        if name and name not in hits:
            hits.append(name)

    old = sys.getprofile()
    old_thread = threading.getprofile() if hasattr(threading, "getprofile") else None
    sys.setprofile(profiler)
    threading.setprofile(profiler)
    try:
        yield
    finally:
        sys.setprofile(old)
        threading.setprofile(old_thread)
    if hits:
        raise DelegationError(
            f"{task}: your code called {', '.join(hits)}. This exercise asks you to build it "
            "yourself from tensor operations, so this part scores zero."
        )
    _publish_record("own_work", task)


def expect_own(obj, task: str, *forbidden) -> None:
    """Fail when `obj` is, wraps or subclasses one of the `forbidden` references."""
    for ref in forbidden:
        same = obj is ref or getattr(obj, "__wrapped__", None) is ref
        sub = isinstance(obj, type) and isinstance(ref, type) and issubclass(obj, ref)
        if same or sub:
            raise DelegationError(f"{task}: your answer is {'a subclass of ' if sub and not same else ''}"
                                  f"{_describe(ref)}. Build it yourself; this part scores zero.")
    if inspect.isfunction(obj) or isinstance(obj, type):
        mod = getattr(obj, "__module__", "") or ""
        if mod.startswith("solutions_lib") or mod.startswith("torch."):
            raise DelegationError(f"{task}: your answer is {_describe(obj)} from a library, not code you wrote.")
    _publish_record("own_work", task)
