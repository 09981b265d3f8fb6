"""What each rank of a `launch` run is waiting for, so a deadlock is reported as one (issue 28).

In a rank started by `launch`, `install(slots, rank)` wraps torch.distributed's blocking calls
(send, recv, barrier and every collective) and its non-blocking posts (isend, irecv,
batch_isend_irecv, a collective with async_op=True). Before each call the rank writes one line
into its slot of a shared-memory array that the parent process reads when the run fails:

    in   dist.recv from rank 0, a (3, 6) float64 tensor, in PipeStage.forward_step(i=3, m=6) [stage 1 of 4]: dist.recv(inp, self.stage - 1)
    done dist.recv ...             (the call returned)
    post dist.irecv from rank 0 ... (posted; its wait() comes later)

The line names the call, the peer or the group, the tensor, and the code that made the call:
the first frame outside torch and the course's launcher and counters, its arguments (ints,
floats, short strings), and the stage when that code is a method of an object with int
attributes `stage` and `n_stages` (a pipeline stage). The slot is not cleared when the call
raises: after a time-out every rank's slot still says where it waited, whichever rank's timer
fired first, so the parent's report does not depend on that race.

Lab code can say more than the call: `waiting_for(text)` marks a wait the wrappers cannot see
(a `work.wait()` of a posted receive): `with waiting_for("gradient of micro-batch 3 from stage 2"):
work.wait()`.
"""
from __future__ import annotations

import contextlib
import functools
import linecache
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

SLOT_BYTES = 768

BLOCKING = ("send", "recv", "barrier", "monitored_barrier", "all_reduce", "broadcast", "reduce", "all_gather",
            "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
            "gather", "scatter", "all_gather_object", "broadcast_object_list", "gather_object",
            "scatter_object_list", "_all_gather_base", "_reduce_scatter_base")
POSTS = ("isend", "irecv", "batch_isend_irecv")
_PEER_ARG = {"send": ("dst", 1), "recv": ("src", 1), "isend": ("dst", 1), "irecv": ("src", 1)}

_state = {"slots": None, "rank": None, "depth": 0}
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_QUIET_FILES = {os.path.join(_HERE, f) for f in ("waits.py", "launch.py", "counting.py", "graded.py",
                                                 "probes_pipeline.py", "probes_tp.py", "probes_sharding.py",
                                                 "probes_comm_bound.py", "probes_fsdp.py", "probes_tp_layers.py",
                                                 "probes_tp_mlp.py", "probes_pipeline_context.py", "checks_ddp.py",
                                                 "checks_script.py", "checks_zero_fsdp.py", "checks_pipeline.py")}
_GRADING = os.path.join(os.path.dirname(_HERE.rstrip(os.sep)), "grading.py")


def _short(v) -> str | None:
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str) and len(v) <= 20:
        return repr(v)
    return None


def _tensor_text(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"a {tuple(t.shape)} {str(t.dtype).replace('torch.', '')} tensor"
    if isinstance(t, (list, tuple)) and t and isinstance(t[0], torch.Tensor):
        return f"{len(t)} tensors of {tuple(t[0].shape)} {str(t[0].dtype).replace('torch.', '')}"
    return ""


_CO_OPTIMIZED = 0x0001


def _peek(f, names) -> dict:
    """The values of local variables `names` of function frame `f`, without keeping them alive:
    before Python 3.13 reading `f.f_locals` stores a snapshot of every local in the frame, which
    would hold tensors the code has since dropped (a memory test would see them); the snapshot is
    emptied again (the next reader, a profiler included, takes a fresh one). A module or class
    body's frame is not read (its f_locals is the namespace itself)."""
    if not f.f_code.co_flags & _CO_OPTIMIZED:
        return {}
    loc = f.f_locals
    if loc is f.f_globals:
        return {}
    try:
        return {n: loc[n] for n in names if n in loc}
    finally:
        if sys.version_info < (3, 13):
            loc.clear()


_QUIET_CACHE: dict[str, bool] = {}


def _quiet(filename: str) -> bool:
    """Whether a frame of `filename` is machinery (torch, the launcher, the counters), not the code
    that made the call."""
    q = _QUIET_CACHE.get(filename)
    if q is None:
        fname = os.path.abspath(filename) if filename.startswith("/") else filename
        q = _QUIET_CACHE[filename] = (fname.startswith(_TORCH_DIR) or fname in _QUIET_FILES or fname == _GRADING
                                      or fname.startswith("<frozen") or fname.endswith(("/contextlib.py",
                                                                                         "/functools.py")))
    return q


def _site() -> str:
    """The code that made the call: the first frame outside torch, this launcher and the course's
    counters; with its arguments and the pipeline stage when it is a stage's method."""
    f = sys._getframe(2)
    while f is not None and _quiet(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return ""
    code = f.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    loc = _peek(f, names)
    args = [f"{n}={_short(loc[n])}" for n in names if n != "self" and n in loc and _short(loc[n]) is not None][:4]
    qual = getattr(code, "co_qualname", code.co_name)
    text = f"in {qual}({', '.join(args)})"
    stage = None
    g = f
    for _ in range(3):   # this frame or a caller: a stage object's method
        if g is None:
            break
        obj = loc.get("self") if g is f else (_peek(g, ("self",)).get("self")
                                               if "self" in g.f_code.co_varnames[:1] else None)
        s, n = getattr(obj, "stage", None), getattr(obj, "n_stages", None)
        obj = None
        if isinstance(s, int) and isinstance(n, int) and not isinstance(s, bool):
            stage = f"stage {s} of {n}"
            break
        g = g.f_back
    line = linecache.getline(code.co_filename, f.f_lineno).strip()
    return text + (f" [{stage}]" if stage else "") + (f": {line[:120]}" if line else "")


def describe(name: str, args, kwargs) -> str:
    """'dist.recv from rank 0, a (3, 6) float64 tensor' for one call."""
    parts = [f"dist.{name}"]
    if name in _PEER_ARG:
        key, pos = _PEER_ARG[name]
        peer = kwargs.get(key, args[pos] if len(args) > pos else None)
        if peer is not None:
            parts[0] += f" {'to' if key == 'dst' else 'from'} rank {peer}"
        t = kwargs.get("tensor", args[0] if args else None)
    elif name == "batch_isend_irecv":
        ops = kwargs.get("p2p_op_list", args[0] if args else []) or []
        each = []
        for op in list(ops)[:4]:
            kind = getattr(getattr(op, "op", None), "__name__", "?")
            peer = getattr(op, "peer", None)
            each.append(f"{kind} {'to' if 'send' in kind else 'from'} rank {peer}")
        parts[0] += " [" + ", ".join(each) + (", ..." if len(ops) > 4 else "") + "]"
        t = getattr(ops[0], "tensor", None) if ops else None
    else:
        t = args[0] if args else next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)
        group = kwargs.get("group")
        if group is not None:
            try:
                parts[0] += f" over ranks {dist.get_process_group_ranks(group)}"
            except Exception:  # noqa: BLE001 - a description only
                pass
        else:
            parts[0] += " over every rank"
    tt = _tensor_text(t)
    return parts[0] + (f", {tt}," if tt else ",")


def _write(state: str, text: str) -> None:
    slots, rank = _state["slots"], _state["rank"]
    if slots is None:
        return
    data = f"{state} {text}".encode("utf-8", "replace")[:SLOT_BYTES - 1] + b"\0"
    slots[rank * SLOT_BYTES: rank * SLOT_BYTES + len(data)] = data


def mark_started() -> None:
    """In a launched rank: the process group is formed and the rank's function is about to run.
    Until this is written the slot is empty, so the parent can tell a rank stuck in start-up (a
    fork that deadlocked, a rendezvous that never completed), which it may start afresh, from one
    busy in the function, which it never restarts."""
    _write("up", "")


def read(slots, rank: int) -> str:
    """The line rank `rank` wrote last ("" if none)."""
    raw = bytes(slots[rank * SLOT_BYTES:(rank + 1) * SLOT_BYTES])
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _wrap(name: str, fn):
    blocking = name in BLOCKING

    @functools.wraps(fn)
    def tracked(*args, **kwargs):
        if _state["depth"]:
            return fn(*args, **kwargs)
        post = not blocking or bool(kwargs.get("async_op"))
        try:
            what = f"{describe(name, args, kwargs)} {_site()}"
        except Exception:  # noqa: BLE001 - a description must never break the call
            what = f"dist.{name}"
        _write("post" if post else "in", what)
        _state["depth"] += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            _state["depth"] -= 1
        if not post:
            _write("done", what)
        return out

    tracked.__wrapped__ = fn
    tracked._tas_tracked = True
    return tracked


@contextlib.contextmanager
def waiting_for(text: str):
    """Mark a wait the wrappers cannot see (a posted receive's `work.wait()`) with what it waits for."""
    try:
        where = _site()
    except Exception:  # noqa: BLE001
        where = ""
    _write("in", f"work.wait() for {text} {where}".strip())
    yield
    _write("done", f"work.wait() for {text}")


def install(slots, rank: int) -> None:
    """In a launched rank: track its waits in `slots` (a shared byte array, SLOT_BYTES per rank)."""
    _state["slots"], _state["rank"] = slots, rank
    for name in BLOCKING + POSTS:
        original = getattr(c10d, name, None)
        if original is None or getattr(original, "_tas_tracked", False):
            continue
        tracked = _wrap(name, original)
        for mod in (dist, c10d):
            if getattr(mod, name, None) is original:
                setattr(mod, name, tracked)
