"""Helpers for the notebooks' test cells: comparisons with messages a student can act on,
and guards that make sure a build-it answer is the student's own work.

Every check raises `GradingError` (an AssertionError) whose message says what was checked,
what was expected, what came back, and, where given, a hint about the usual mistake.
"""
from __future__ import annotations

import inspect
import sys
import threading
import types
from contextlib import contextmanager
from pathlib import Path

import numpy as np


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
    if hasattr(got, "detach"):  # a torch tensor
        got = got.detach().cpu().double().numpy()
    try:
        arr = np.asarray(got, dtype=np.float64)
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


def expect_equal(got, expected, what: str, hint: str = "") -> None:
    """Exact equality for ints, strings, tuples, shapes."""
    if not (type(got) is type(expected) and got == expected) and not (
        isinstance(got, (int, np.integer)) and isinstance(expected, (int, np.integer)) and int(got) == int(expected)
    ):
        tip = f" {hint}" if hint else ""
        raise GradingError(f"{what}: expected {expected!r}, got {got!r}.{tip}")


def expect_true(condition, message: str) -> None:
    if not bool(condition):
        raise GradingError(message)


def expect_raises(fn, exc_type, what: str, hint: str = "") -> None:
    """Check that `fn()` raises `exc_type` (bad input must raise, not return a number)."""
    try:
        result = fn()
    except exc_type:
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
