"""Helpers for the notebooks' test cells: comparisons with messages a student can act on,
and guards that make sure a build-it answer is the student's own work.

Every check raises `GradingError` (an AssertionError) whose message says what was checked,
what was expected, what came back, and, where given, a hint about the usual mistake.

Against a submission that tampers with the kernel it runs in (docs/THREAT_MODEL.md,
docs/GRADING.md):
- values are read through the base types only (`plain`, `as_float_array`): no method of a
  student object runs while a check reads it, and a subclass whose `__eq__` or `__float__`
  lies is compared by what it holds;
- while `nbgrader autograde` runs (NBGRADER_EXECUTION=autograde) every check leaves a *check
  record* in the cell's outputs (MIME type `RECORD_MIME`: what was checked and the value the
  student's code returned; the expected value when the kernel has one). At grading time the
  references are `Withheld` stand-ins (solutions_lib.withheld): a check against one records
  the value without deciding. The grader (solutions_lib.course.integrity) decides every test
  cell outside the kernel, against a trusted run of the instructor's solution;
- `no_delegation` / `expect_own` make sure a build-it answer does not call, wrap or subclass
  what it should build, nor run it in a background thread.
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

from .withheld import Withheld, contains_withheld, is_withheld  # noqa: F401  (re-exported)


#: MIME type of the check records read by the grader (solutions_lib.course.integrity).
RECORD_MIME = "application/vnd.tas.check+json"
#: Arrays up to this many entries are recorded in full; the grader compares them with the
#: trusted run's expected values. Larger ones are recorded as a strided sample of this size.
RECORD_MAX_VALUES = 8192
_IMPORT_PID = os.getpid()
#: Where the records of a test cell run by the grader itself go (course/grader_side.py sets and clears it).
RECORD_SINK: dict = {}


def _record_values(arr: np.ndarray):
    """(values, sampled): `arr` as a flat list, or a strided sample when it is large."""
    flat = np.asarray(arr, dtype=np.float64).ravel()
    if flat.size <= RECORD_MAX_VALUES:
        return flat.tolist(), False
    idx = np.linspace(0, flat.size - 1, RECORD_MAX_VALUES).astype(np.int64)
    return flat[idx].tolist(), True


def term_seed(n: int) -> int:
    """The seed of a hidden test case for this term: `n` mixed with the course's secret.

    The grader sets TAS_TERM_SEED from the course root's secret (`.course_secret` or
    $TAS_COURSE_SECRET; course/config.py), for the trusted run and every student's kernel alike,
    so each term's hidden inputs differ and a case that leaked last term is not this term's.
    Without a secret (a student's own machine, a self-study learner) it returns `n` itself.
    """
    import hashlib

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"term_seed takes an int, got {n!r}")
    key = os.environ.get("TAS_TERM_SEED", "")
    if not key:
        return int(n)
    return int.from_bytes(hashlib.sha256(f"{key}:{int(n)}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def _grading() -> bool:
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


_SEEN: dict = {"cell": None, "counts": {}}
_TABLES: dict | None = None


def _visible_tables() -> dict:
    """assignment -> {what: [expected record, ...]}: the expected values of the visible reference
    checks that course/student_kit.py wrote into the student edition (empty in the full one)."""
    global _TABLES
    if _TABLES is None:
        import json
        _TABLES = {}
        folder = Path(__file__).resolve().parent / "_visible"
        for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                _TABLES[f.stem] = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                pass
    return _TABLES


def _occurrence(what: str) -> int:
    """How many checks described `what` ran before this one in the running cell (IPython's
    execution count tells cells apart; a re-run cell counts from 0 again)."""
    ipython = sys.modules.get("IPython.core.interactiveshell")
    shell = ipython.InteractiveShell.instance() if ipython and ipython.InteractiveShell.initialized() else None
    cell = getattr(shell, "execution_count", None)
    if cell != _SEEN["cell"]:
        _SEEN["cell"], _SEEN["counts"] = cell, {}
    n = _SEEN["counts"].get(what, 0)
    _SEEN["counts"][what] = n + 1
    return n


def _visible_expected(what: str, measured: bool) -> dict | None:
    """The student edition's expected record for a visible check against a reference (see
    student_kit.py); None after telling the student when the check can only be decided at
    grading time. Raises GradingError when the kit has no value for it."""
    from ._edition import EDITION

    if measured:
        print(f"[{what}: compared with the reference on your own measurement; decided when the notebook is graded]")
        return None
    n = _occurrence(what)
    tables = _visible_tables()
    here = tables.get(Path(os.getcwd()).name, {})
    found = here.get(what) or next((t[what] for t in tables.values() if what in t), None)
    if found is None or n >= len(found):
        where = "is not in the student edition" if EDITION == "student" else "is withheld while grading"
        raise GradingError(f"{what}: this check compares with a reference answer of the course, which {where}, "
                           "and the kit holds no expected value for it: it is decided when your notebook is graded.")
    return found[n]


def _decide_locally(kind: str, got, what: str, rec: dict, *, rtol=None, atol=None, unit="", hint="") -> None:
    """Decide a check from a visible expected record, as the grader would (integrity.verify)."""
    if kind == "close":
        e = np.asarray(rec.get("expected"), dtype=np.float64)
        shape = rec.get("expected_shape")
        g = np.asarray(got, dtype=np.float64)
        if rec.get("sampled"):
            g = np.asarray(_record_values(g)[0])
        elif shape is not None and e.size == int(np.prod(shape)):
            e = e.reshape(shape)
        problem = close_failure(g, e, what, rtol=rtol, atol=atol, unit=unit, hint=hint)
    elif kind == "equal":
        e = rec.get("expected")
        g = _jsonable(plain(got))
        ok = same_value(_listed(g), _listed(e))
        problem = None if ok else f"{what}: expected {e!r:.200}, got {_short_repr(plain(got))}." + (f" {hint}" if hint else "")
    else:
        problem = between_failure(np.asarray(got, dtype=np.float64), rec.get("lo"), rec.get("hi"), what, unit=unit, hint=hint)
    if problem:
        raise GradingError(problem)


def _listed(x):
    """Tuples as lists (the records went through JSON)."""
    if isinstance(x, (list, tuple)):
        return [_listed(v) for v in x]
    if isinstance(x, dict):
        return {k: _listed(v) for k, v in x.items()}
    return x


def _only_in_the_kernel(what: str) -> None:
    """A check against a withheld value can only be decided by the grader, from the record the
    notebook's kernel publishes: anywhere else (a rank of a distributed check) it must fail."""
    if os.getpid() != _IMPORT_PID or os.environ.get("NBGRADER_EXECUTION") != "autograde":
        raise GradingError(f"{what}: this check compares with a reference value withheld at grading time, "
                           "which only the notebook itself can report (not a rank or a subprocess).")


def _publish_record(kind: str, what: str, **data) -> None:
    """Leave a check record in the running cell's outputs, during autograde only.

    Not from processes forked off the kernel (their display messages would corrupt the
    kernel's sockets); not outside IPython.
    """
    sink = RECORD_SINK.get("records")
    if sink is not None and os.getpid() == _IMPORT_PID:
        # a test cell the grader runs itself (course/grader_side.py): the records stay in the grader
        sink.append({"kind": kind, "what": str(what)[:200], **data})
        return
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


def _jsonable(x, limit: int = 1_000_000):
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
    if is_withheld(got):
        raise GradingError(f"{what}: your code returned a value of the course's reference implementation, which is "
                           "withheld at grading time. Compute it yourself.")
    got = _numeric_data(got, what)
    try:
        arr = np.array(got, dtype=np.float64, subok=False)
    except (TypeError, ValueError):
        raise GradingError(f"{what}: expected a number or an array of numbers, got {type(got).__name__} {got!r:.80}") from None
    return arr


_NUMERIC_LEAVES = (bool, int, float, np.bool_, np.integer, np.floating)


def _numeric_data(x, what: str, depth: int = 0):
    """`x` rebuilt from base types only: Python and numpy numbers, ndarrays (read through the
    base class), tensors (read through `torch.Tensor` itself), and lists/tuples of those.

    Any other object is refused *without calling any of its methods*, so an answer object
    cannot run code while a check reads it (e.g. walk up to the check's frame in `__array__`
    or `__float__` to find the expected value)."""
    if depth > 64:
        raise GradingError(f"{what}: the value is nested too deeply to be a number or an array of numbers")
    t = type(x)
    if t in (bool, int, float):
        return x
    if isinstance(x, np.generic) and isinstance(x, _NUMERIC_LEAVES):
        return np.array(x, subok=False).item()
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return [_numeric_data(v, what, depth + 1) for v in np.ndarray.tolist(x)]
        return np.array(x, subok=False, copy=True)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        # as the base class, so a subclass's __torch_function__ cannot change what is read
        return torch.Tensor.as_subclass(x, torch.Tensor).detach().cpu().double().numpy()
    if isinstance(x, (int, float)):      # subclasses: what they hold, not what they say
        return plain(x)
    if isinstance(x, (list, tuple)):
        it = list.__iter__(x) if isinstance(x, list) else tuple.__iter__(x)
        return [_numeric_data(v, what, depth + 1) for v in it]
    raise GradingError(f"{what}: expected a number or an array of numbers, got an object of type "
                       f"{type(x).__name__}. Return plain numbers, numpy arrays or tensors.")


def close_failure(g: np.ndarray, e: np.ndarray, what: str, *, rtol: float, atol: float,
                  unit: str = "", hint: str = "") -> str | None:
    """None when |g - e| <= atol + rtol |e| everywhere (and g is finite, same shape); else the
    message a student can act on. Used by `expect_close` in the kernel and by the grader."""
    u = f" {unit}" if unit else ""
    tip = f" {hint}" if hint else ""
    if g.shape != e.shape:
        return f"{what}: expected shape {e.shape}, got shape {g.shape}.{tip}"
    if not np.all(np.isfinite(g)):
        return f"{what}: got a non-finite value ({_fmt(g)}); expected {_fmt(e)}{u}.{tip}"
    err = np.abs(g - e)
    bad = err > atol + rtol * np.abs(e)
    if not np.any(bad):
        return None
    if g.ndim == 0:
        rel = float(err) / abs(float(e)) if float(e) != 0 else float("inf")
        return (f"{what}: expected {_fmt(e)}{u}, got {_fmt(g)}{u} "
                f"(relative error {rel:.2e}, allowed {rtol:.0e}).{tip}")
    idx = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), g.shape)
    return (f"{what}: {int(bad.sum())} of {g.size} entries differ; at index {tuple(int(i) for i in idx)} "
            f"expected {_fmt(e[idx])}{u}, got {_fmt(g[idx])}{u}.{tip}")


def between_failure(g: np.ndarray, lo, hi, what: str, *, unit: str = "", hint: str = "") -> str | None:
    """None when lo <= g <= hi everywhere (a bound of None is open) and g is finite; else the
    message a student can act on. Used by `expect_between` in the kernel and by the grader."""
    u = f" {unit}" if unit else ""
    tip = f" {hint}" if hint else ""
    if g.size == 0:
        return f"{what}: got an empty value.{tip}"
    if not np.all(np.isfinite(g)):
        return f"{what}: got a non-finite value ({_fmt(g)}).{tip}"
    bad = np.zeros(g.shape, dtype=bool)
    if lo is not None:
        bad |= g < float(lo)
    if hi is not None:
        bad |= g > float(hi)
    if not np.any(bad):
        return None
    span = (f"between {_fmt(lo)} and {_fmt(hi)}{u}" if lo is not None and hi is not None else
            f"at least {_fmt(lo)}{u}" if lo is not None else f"at most {_fmt(hi)}{u}")
    if g.ndim == 0:
        return f"{what}: expected a value {span}, got {_fmt(g)}{u}.{tip}"
    idx = np.unravel_index(int(np.argmax(bad)), g.shape)
    return (f"{what}: {int(bad.sum())} of {g.size} entries are not {span}; at index "
            f"{tuple(int(i) for i in idx)} got {_fmt(g[idx])}{u}.{tip}")


def _calls(expected):
    """For a measured check against withheld values: the reference calls (plain data) that the
    grader redoes outside the kernel on the inputs measured here; None when not all are known."""
    from .withheld import call_of

    if is_withheld(expected):
        return call_of(expected)
    if isinstance(expected, (list, tuple)):
        out = []
        for e in (list.__iter__(expected) if isinstance(expected, list) else tuple.__iter__(expected)):
            if is_withheld(e):
                c = call_of(e)
                if c is None:
                    return None
                out.append(c)
            elif type(e) in (int, float):
                out.append({"value": e})
            else:
                return None
        return {"list": out}
    return None


def same_value(a, b) -> bool:
    """Exact equality of plain data with exact types (True is not 1; 1 is not 1.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return a == b


def expect_close(got, expected, what: str, *, rtol: float = 1e-6, atol: float = 0.0,
                 unit: str = "", hint: str = "", measured: bool = False) -> None:
    """Check that number/array `got` equals `expected` within |got-exp| <= atol + rtol*|exp|.

    `measured=True` marks an expected value measured in the same kernel (a timing, a
    bandwidth): the grader then compares with the kernel's own expected value instead of
    the trusted run's, which measured on another occasion.
    """
    g = as_float_array(got, what)
    base = dict(rtol=float(rtol), atol=float(atol), shape=list(g.shape), unit=str(unit), hint=str(hint),
                measured=bool(measured))
    if contains_withheld(expected) and not _grading():
        rec = _visible_expected(what, measured)   # the student edition: values written into the kit
        if rec is not None:
            _decide_locally("close", g, what, rec, rtol=rtol, atol=atol, unit=unit, hint=hint)
        return
    if contains_withheld(expected):
        # grading: the expected value stays with the grader; record what the student's code returned
        _only_in_the_kernel(what)
        vals, sampled = _record_values(g)
        calls = _calls(expected) if measured else None
        _publish_record("close", what, got=vals, sampled=sampled, withheld=True, calls=calls, **base)
        return
    e = np.asarray(plain(expected) if not isinstance(expected, np.ndarray) else expected, dtype=np.float64)
    problem = close_failure(g, e, what, rtol=rtol, atol=atol, unit=unit, hint=hint)
    if problem:
        raise GradingError(problem)
    vals, sampled = _record_values(g)
    evals, _ = _record_values(e)
    _publish_record("close", what, got=vals, expected=evals, expected_shape=list(e.shape), sampled=sampled, **base)


def expect_equal(got, expected, what: str, hint: str = "") -> None:
    """Exact equality for ints, strings, tuples, shapes: same type (numpy ints count as int,
    a tuple subclass such as torch.Size as a tuple) and equal values, read with `plain`."""
    if is_withheld(got):
        raise GradingError(f"{what}: your code returned a value of the course's reference implementation, which is "
                           "withheld at grading time. Compute it yourself.")
    g = plain(got)
    if contains_withheld(expected) and not _grading():
        _decide_locally("equal", got, what, _visible_expected(what, False), hint=hint)
        return
    if contains_withheld(expected):
        _only_in_the_kernel(what)
        _publish_record("equal", what, got=_jsonable(g), got_repr=_short_repr(g), withheld=True, hint=str(hint))
        return
    e = plain(expected)
    if not (type(g) is type(e) and g == e):
        tip = f" {hint}" if hint else ""
        raise GradingError(f"{what}: expected {expected!r}, got {got!r}.{tip}")
    _publish_record("equal", what, got=_jsonable(g), expected=_jsonable(e), hint=str(hint))


def expect_between(got, lo, hi, what: str, *, unit: str = "", hint: str = "", measured: bool = False) -> None:
    """Check that every entry of `got` is finite and lies in [lo, hi] (None: that side open).

    The predicate form of a check (docs/GRADING.md rule 4): the record carries the value, and
    the grader evaluates the predicate itself with the trusted run's bounds (`measured=True`:
    bounds measured in this kernel, e.g. a multiple of a timing, are taken from the kernel).
    """
    g = as_float_array(got, what)
    base = dict(unit=str(unit), hint=str(hint), measured=bool(measured), shape=list(g.shape))
    vals, sampled = _record_values(g)
    if (contains_withheld(lo) or contains_withheld(hi)) and not _grading():
        rec = _visible_expected(what, measured)
        if rec is not None:
            _decide_locally("between", g, what, rec, unit=unit, hint=hint)
        return
    if contains_withheld(lo) or contains_withheld(hi):
        _only_in_the_kernel(what)
        _publish_record("between", what, got=vals, sampled=sampled, withheld=True, **base)
        return
    lo_, hi_ = (None if b is None else float(np.asarray(plain(b), dtype=np.float64)) for b in (lo, hi))
    problem = between_failure(g, lo_, hi_, what, unit=unit, hint=hint)
    if problem:
        raise GradingError(problem)
    _publish_record("between", what, got=vals, sampled=sampled, lo=lo_, hi=hi_, **base)


def _short_repr(x) -> str:
    try:
        return repr(x)[:200] if type(x) in (bool, int, float, str, list, tuple, dict, type(None)) else f"<{type(x).__name__}>"
    except Exception:  # noqa: BLE001
        return "<unprintable>"


def expect_true(condition, message: str) -> None:
    """Fail with `message` unless `condition` holds (a bool, numpy bool or 1-element tensor)."""
    if contains_withheld(condition):
        raise GradingError(f"{message}: this check needs a withheld reference value (a test that must "
                           "compare with expect_close or expect_equal instead; tell your instructor).")
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


def expect_accepts(fn, what: str, hint: str = "") -> None:
    """Check that `fn()` returns, without raising, on a valid input (its value is not graded).

    A validation cell holds one of these next to its `expect_raises` checks, so that an
    answer which raises `ValueError` on every input (no formula at all) scores nothing there,
    while a wrong formula with correct argument checks still earns the validation point.
    """
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001
        raise GradingError(f"{what}: this input is valid, but your code raised {type(e).__name__}: {e}. "
                           f"Raise only for the invalid inputs. {hint}".rstrip()) from None
    if is_withheld(result):
        raise GradingError(f"{what}: your code returned a value of the course's reference implementation, "
                           "which is withheld at grading time. Compute it yourself.")
    _publish_record("accepts", what)


# ---------------------------------------------------------------- anti-delegation


def _code_objects(obj) -> set:
    codes = set()
    if isinstance(obj, type):
        # the class's own methods; nested classes are not followed (an autograd.Function's
        # _backward_cls points back at the Function: following it would never end)
        for attr in vars(obj).values():
            if isinstance(attr, type):
                continue
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
    builtins_: dict[int, str] = {}                  # C functions (torch.softmax), by identity
    methods: dict[tuple[type, str], str] = {}       # methods of C types (torch.Tensor.softmax)
    for obj in forbidden:
        if isinstance(obj, types.ModuleType):
            f = getattr(obj, "__file__", None)
            if f:
                files[str(Path(f).resolve())] = _describe(obj)
        elif isinstance(obj, types.BuiltinFunctionType):
            builtins_[id(obj)] = f"{getattr(obj, '__module__', None) or 'builtins'}.{obj.__name__}"
        elif isinstance(getattr(obj, "__objclass__", None), type) and isinstance(getattr(obj, "__name__", None), str):
            owner = "torch.Tensor" if obj.__objclass__.__name__ == "TensorBase" else obj.__objclass__.__name__
            methods[(obj.__objclass__, obj.__name__)] = f"{owner}.{obj.__name__}"
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

    closing = []

    def profiler(frame, event, arg):
        if closing:
            return
        if event == "c_call":
            if arg is sys.setprofile or arg is sys.settrace or arg is threading.setprofile \
                    or arg is threading.settrace:
                hits.append("a change of the profiler")
            name = builtins_.get(id(arg))
            if name is None and methods:
                owner = getattr(arg, "__self__", None)
                for (cls, meth), label in methods.items():
                    if getattr(arg, "__name__", None) == meth and isinstance(owner, cls):
                        name = label
                        break
            if name and name not in hits:
                hits.append(name)
            return
        if event != "call":
            return
        code = frame.f_code
        if code is _SETPROFILE_CODE or code is _SETTRACE_CODE:
            hits.append("a change of the profiler")
        name = codes.get(code) or (_resolve(code.co_filename) if files else None)
        if name and name not in hits:
            hits.append(name)

    def check_threads(when: str):
        problem = _foreign_thread(codes, _resolve if files else None)
        if problem:
            raise DelegationError(f"{task}: {problem} was running {when} the check. Build-it checks run "
                                  "your code alone: stop your background threads before the tests, so this "
                                  "part scores zero.")

    check_threads("before")
    old = sys.getprofile()
    old_thread = threading.getprofile() if hasattr(threading, "getprofile") else None
    threading.setprofile(profiler)
    sys.setprofile(profiler)
    try:
        yield
    finally:
        closing.append(True)
        intact = sys.getprofile() is profiler
        sys.setprofile(old)
        threading.setprofile(old_thread)
    if not intact and "a change of the profiler" not in hits:
        hits.append("a change of the profiler")
    check_threads("after")
    if hits:
        raise DelegationError(
            f"{task}: your code called {', '.join(hits)}. This exercise asks you to build it "
            "yourself from tensor operations, so this part scores zero."
        )
    _publish_record("own_work", task)


_SETPROFILE_CODE = getattr(threading.setprofile, "__code__", None)
_SETTRACE_CODE = getattr(threading.settrace, "__code__", None)


def _installed_dirs() -> set[str]:
    """The folders the kernel's own packages are installed in: where the kernel (ipykernel, IPython,
    zmq, tornado, ...: imported before any cell runs) and numpy (this module's own import) came
    from when this module was imported. They can lie outside sys.prefix (a user site, a .pth
    file, PYTHONPATH: the kit's benchmark venv, a `pip install --user` beside a system Jupyter),
    and a thread that runs there (zmq's garbage collector after a plot) is not the student's.
    Only folders that hold one of these packages, read once: not the user site as such, which a
    kernel could write a module into, nor a package a cell could have replaced in sys.modules
    before this import."""
    dirs = set()
    for name in ("numpy", "zmq", "IPython", "ipykernel", "jupyter_client", "tornado", "traitlets"):
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None) if mod is not None else None
        if isinstance(f, str) and os.path.basename(f) == "__init__.py":
            dirs.add(os.path.dirname(os.path.dirname(f)))
    return {os.path.realpath(d) for d in dirs if d and os.path.isdir(d)}


_INSTALLED_DIRS = _installed_dirs()


def _trusted_roots() -> tuple[str, ...]:
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, os.path.dirname(__file__),
                                           os.path.dirname(os.__file__)) if p} | _INSTALLED_DIRS
    return tuple(r.rstrip("/") + "/" for r in roots)


_INSTALLED_FILES: dict[tuple[str, tuple], bool] = {}


def _installed_file(fname: str, roots: tuple) -> bool:
    """Whether `fname` is a file under one of `roots` (remembered: the kernel's own threads sit
    in the same few installed files at every check; a file that appears later is still foreign)."""
    key = (fname, roots)
    found = _INSTALLED_FILES.get(key)
    if found is None:
        real = os.path.realpath(fname) if fname.startswith("/") else fname
        found = real.startswith(roots) and os.path.isfile(real)
        if found:
            _INSTALLED_FILES[key] = True   # only a positive answer is kept
    return found


def _foreign_thread(codes: dict, resolve) -> str | None:
    """A description of another live thread that runs code not installed with Python, its
    packages or solutions_lib (code from a notebook cell, `exec`, a temp file), or forbidden
    code; else None. Threads that IPython and ipykernel run sit in installed packages."""
    roots = _trusted_roots()
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        depth = 0
        while frame is not None and depth < 200:
            code = frame.f_code
            fname = code.co_filename
            if codes.get(code) or (resolve is not None and resolve(fname)):
                return "a background thread calling the reference"
            if not _installed_file(fname, roots):
                return f"a background thread started by your code ({code.co_name} in {fname})"
            frame = frame.f_back
            depth += 1
    return None


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


def answers(*names: str) -> tuple:
    """The caller's answers `names`, looked up in the notebook's namespace (the test cell's globals).

    A test cell that starts with ``Router, moe_forward = answers("Router", "moe_forward")`` tells a
    student who ran it before the answer cell what to do ("run the answer cell above first"),
    instead of a bare NameError. Returns the objects in order (one object for one name)."""
    if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise ValueError(f"answers() takes the answers' names as identifiers, got {names!r}")
    g = sys._getframe(1).f_globals
    missing = [n for n in names if n not in g]
    if missing:
        what = ", ".join(f"`{n}`" for n in missing)
        raise AssertionError(f"{what} {'is' if len(missing) == 1 else 'are'} not defined yet: run the answer "
                             "cell above first (and the cells before it), then this test again.")
    found = tuple(g[n] for n in names)
    return found[0] if len(found) == 1 else found
