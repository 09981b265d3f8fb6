"""Test machinery for assignments 08 (data pipeline) and 09 (reading a profiler trace).

Kept out of the test cells so that each cell reads as a few lines of intent:

- `other_process_hash()`: while it is active, the builtin `hash()` of a string (bytes, or a
  tuple/frozenset holding one) returns what it could return in another Python process, one
  started with another `PYTHONHASHSEED`. A MinHash built on `hash()` then gives another
  signature for the same set and the same seed, which is exactly what breaks deduplication
  sharded over worker processes; one built on `hashlib` does not notice.
- `values_of(got, keys, what)`: read `got[k]` for each key of a dict an answer returned, after a
  check that says which keys are missing (a `GradingError` with a hint, not a bare `KeyError`).
"""
from __future__ import annotations

import builtins
import math
from contextlib import contextmanager

from .grading import GradingError, expect_equal

#: The salt `other_process_hash` mixes into every salted hash (any constant works).
OTHER_PROCESS_SALT = 0x5BD1E995


def _salted(o) -> bool:
    """True for the values whose hash Python salts per process: str and bytes, and tuples or
    frozensets that hold one (ints, floats and None hash the same in every process)."""
    if isinstance(o, (str, bytes)):
        return True
    if isinstance(o, (tuple, frozenset)):
        return any(_salted(v) for v in o)
    return False


@contextmanager
def other_process_hash(salt: int = OTHER_PROCESS_SALT):
    """Within the block, `hash(x)` of a salted value (see `_salted`) is the hash another Python
    process could give it; every other value hashes as before. Restores `builtins.hash` on exit."""
    original = builtins.hash

    def hash_in_another_process(o):
        return original((salt, o)) if _salted(o) else original(o)

    builtins.hash = hash_in_another_process
    try:
        yield
    finally:
        builtins.hash = original


def values_of(got, keys, what: str, hint: str = "") -> list:
    """`[got[k] for k in keys]`, after checking (a recorded check) that `got` is a dict holding
    every key; a missing key fails with the list of missing keys and `hint`, not a KeyError."""
    keys = list(keys)
    missing = [k for k in keys if not isinstance(got, dict) or k not in got]
    expect_equal(missing, [], f"{what}: keys missing from the returned dict",
                 hint=hint or "Return a dict with one entry per key asked for.")
    if not isinstance(got, dict):  # pragma: no cover  (expect_equal has raised)
        raise GradingError(f"{what}: expected a dict, got {type(got).__name__}")
    return [got.get(k, math.nan) for k in keys]
