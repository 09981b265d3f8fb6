"""The bounded child of `integrity.redo_reference`: a measured check's reference call, redone.

Reads {"calls": ..., "allowed": [...]} as JSON on stdin and prints {"value": ...}; exits 1 when
the call cannot be redone (a name that is not an allowed course reference, bad data). The parent
runs it with a time and memory limit, so the kernel's choice of arguments cannot stall or
exhaust the grader. Kept apart from integrity.py so that it starts with few imports.
"""
from __future__ import annotations

import json
import sys


def _redo_one(call, allowed: set[str] | None = None) -> object:
    import importlib

    from .withheld_view import withheld_names
    from ..withheld import from_data

    if not isinstance(call, dict):
        return None
    if "value" in call and len(call) == 1:
        return call["value"]
    name = call.get("name")
    if name not in withheld_names() or (allowed is not None and name not in allowed):
        return None                        # only a reference this test cell names, never anything else
    module, _, attr = name.rpartition(".")
    fn = getattr(importlib.import_module(module), attr)
    out = fn(*from_data(call.get("args", [])), **from_data(call.get("kwargs", {})))
    for key in call.get("index", []):
        out = out[key]
    return out


def _redo_in_child(payload: dict):
    calls, allowed = payload.get("calls"), payload.get("allowed")
    allowed = None if allowed is None else set(allowed)
    if isinstance(calls, dict) and "list" in calls:
        vals = [_redo_one(c, allowed) for c in calls["list"]]
        return None if any(v is None for v in vals) else vals
    return _redo_one(calls, allowed)


def _plain(x):
    import numpy as np
    x = np.asarray(x).tolist() if isinstance(x, (np.ndarray, np.generic)) else x
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return float(x) if not isinstance(x, (bool, int, float, type(None))) else x


def main() -> int:
    try:
        out = _redo_in_child(json.loads(sys.stdin.read()))
    except Exception:  # noqa: BLE001  (bad data from the kernel: the check cannot be verified)
        return 1
    if out is None:
        return 1
    print(json.dumps({"value": _plain(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
