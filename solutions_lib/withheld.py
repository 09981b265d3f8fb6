"""Stand-ins for the reference implementations inside a grading kernel.

At grading time the kernel that runs a student's notebook imports a *view* of `solutions_lib`
in which every reference answer (a function or class that a student is asked to build, and
that the tests use as the oracle) is replaced by a `Withheld` stand-in
(`solutions_lib.course.withheld_view`). Calling it, reading its attributes or doing arithmetic
with it gives another `Withheld`: a test cell runs exactly as written, but the expected values
it would have computed never exist in the kernel. The checks (`solutions_lib.grading`) record
what the student's code returned; the grader compares that, outside the kernel, with the
values a trusted run of the instructor's solution recorded (course/trusted.py).

Anything that needs a real value (`float(w)`, `bool(w)`, `len(w)`, iteration, indexing into
numpy) raises `WithheldError`, which names the reference, so a student whose answer calls the
reference gets a clear error instead of a number.
"""
from __future__ import annotations

import dis
import sys


def _unpack_count(frame) -> int | None:
    """n when `frame` is executing `UNPACK_SEQUENCE n` (a plain `a, b, c = x`), else None."""
    try:
        for ins in dis.get_instructions(frame.f_code):
            if ins.offset == frame.f_lasti:
                return int(ins.arg) if ins.opname == "UNPACK_SEQUENCE" else None
    except Exception:  # noqa: BLE001
        return None
    return None


def _where() -> str:
    from ._edition import EDITION
    return "not in the student edition" if EDITION == "student" else "withheld while grading"


class WithheldError(TypeError):
    """A withheld reference value was used where a real value is needed."""


class Withheld:
    """A reference value the grading kernel must not know. See the module docstring."""

    __slots__ = ("_name", "_call")

    def __init__(self, name: str, call: dict | None = None):
        object.__setattr__(self, "_name", str(name))
        object.__setattr__(self, "_call", call)

    def __repr__(self):
        return f"<withheld {object.__getattribute__(self, '_name')}>"

    def _fail(self, what: str):
        name = object.__getattribute__(self, "_name")
        raise WithheldError(f"{name} is a reference answer of the course and is {_where()}; "
                            f"it cannot be used as {what}. Compute it with your own code.")

    def __format__(self, spec):
        # in a check's description (f"... {ref.f(x):.3g}"): the grader shows its own text
        return "<withheld>"

    def __call__(self, *args, **kwargs):
        name = object.__getattribute__(self, "_name")
        call = None
        if object.__getattribute__(self, "_call") is None and _is_data(args) and _is_data(kwargs):
            # a reference applied to plain data: the grader can redo it outside the kernel
            # (only for checks marked measured=True; see solutions_lib.course.integrity)
            call = {"name": name, "args": _as_data(list(args)), "kwargs": _as_data(dict(kwargs)), "index": []}
        return Withheld(f"{name}(...)", call)

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Withheld(f"{object.__getattribute__(self, '_name')}.{attr}")

    def __getitem__(self, key):
        return _indexed(self, key)

    def __setattr__(self, attr, value):
        self._fail("an object whose attributes are set")

    def __bool__(self):
        self._fail("a truth value")

    def __float__(self):
        self._fail("a number")

    def __int__(self):
        self._fail("an integer")

    def __index__(self):
        self._fail("an index")

    def __len__(self):
        self._fail("a sized container")

    def __iter__(self):
        # `a, b = ref.f(...)`: a function that returns a tuple gives that many stand-ins. The
        # count is read from the unpacking instruction being run (CPython); anything else
        # that iterates needs real values.
        n = _unpack_count(sys._getframe(1))
        if n is None:
            self._fail("an iterable")
        return iter([_indexed(self, i) for i in range(n)])

    def __array__(self, *args, **kwargs):
        self._fail("an array")

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return Withheld("a comparison with a withheld value")

    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__


def _absorb(self, *args):
    return Withheld(f"arithmetic on {object.__getattribute__(self, '_name')}")


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
            "lshift", "rshift", "divmod"):
    setattr(Withheld, f"__{_op}__", _absorb)
    setattr(Withheld, f"__r{_op}__", _absorb)
for _op in ("neg", "pos", "abs", "invert", "round", "trunc", "floor", "ceil"):
    setattr(Withheld, f"__{_op}__", _absorb)
del _op


def _indexed(w: Withheld, key) -> Withheld:
    name = object.__getattribute__(w, "_name")
    call = object.__getattribute__(w, "_call")
    if call is not None and type(key) in (int, str):
        call = {**call, "index": [*call["index"], key]}
    else:
        call = None
    return Withheld(f"{name}[{key!r:.20}]", call)


def call_of(w: Withheld) -> dict | None:
    """The reference call a Withheld stands for, as plain data, or None."""
    return object.__getattribute__(w, "_call")


def _is_data(x, depth: int = 0) -> bool:
    if depth > 8:
        return False
    t = type(x)
    if x is None or t in (bool, int, float, str):
        return True
    try:
        import numpy as np
        if t is np.ndarray:
            return x.dtype.kind in "biuf" and x.size <= 1_000_000
        if isinstance(x, np.generic):
            return x.dtype.kind in "biuf"
    except ImportError:
        pass
    if t in (list, tuple):
        return len(x) <= 100_000 and all(_is_data(v, depth + 1) for v in x)
    if t is dict:
        return all(type(k) is str and _is_data(v, depth + 1) for k, v in x.items())
    return False


def _as_data(x):
    """JSON-able form of data accepted by `_is_data` (arrays tagged so they come back as arrays)."""
    t = type(x)
    if t in (list, tuple):
        return [_as_data(v) for v in x]
    if t is dict:
        return {k: _as_data(v) for k, v in x.items()}
    if x is None or t in (bool, int, float, str):
        return x
    import numpy as np
    if t is np.ndarray:
        return {"__ndarray__": x.tolist(), "dtype": str(x.dtype)}
    return np.asarray(x).item()


def from_data(x):
    """Inverse of `_as_data` (lists stay lists; tagged arrays become numpy arrays). Records read
    back from a notebook hold nbformat's NotebookNode (a dict subclass) for every dict."""
    if isinstance(x, list):
        return [from_data(v) for v in x]
    if isinstance(x, dict):
        if "__ndarray__" in x:
            import numpy as np
            return np.array(x["__ndarray__"], dtype=x.get("dtype", "float64"))
        return {k: from_data(v) for k, v in x.items()}
    return x


def is_withheld(x) -> bool:
    return type(x) is Withheld


def contains_withheld(x, depth: int = 0) -> bool:
    """True when `x` is a Withheld or a list/tuple/dict holding one (walked with base types)."""
    if type(x) is Withheld:
        return True
    if depth > 32:
        return False
    if isinstance(x, (list, tuple)):
        it = list.__iter__(x) if isinstance(x, list) else tuple.__iter__(x)
        return any(contains_withheld(v, depth + 1) for v in it)
    if isinstance(x, dict):
        return any(contains_withheld(v, depth + 1) for v in dict.values(x))
    return False
