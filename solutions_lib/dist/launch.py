"""Run a function on N ranks of a torch.distributed process group, from a script or a notebook.

    results = launch(fn, world_size=2, args=(x,))   # fn(rank, world_size, x) on every rank

* Backend: NCCL when CUDA has at least `world_size` devices, otherwise gloo (CPU).
* Rendezvous without a port race: the parent opens a ``TCPStore`` on port 0 (the kernel picks
  a free port) and every rank joins that store; no MASTER_PORT guessing.
* Start method: ``fork`` for gloo on Linux, so functions defined in a notebook cell work (the
  ``spawn`` pickling trap); ``spawn`` for NCCL, where the function must be importable.
  On a machine with a GPU, a forked rank sees no GPU (``torch.cuda.is_available()`` is False in
  it): CUDA does not survive ``fork`` once the parent has touched it, even through
  ``torch.cuda.is_available()``, and torch's optimizers probe it on every step. There, too, a
  forked rank cannot run backward once the parent has run one (autograd's GPU worker threads);
  use ``start_method="spawn"`` with an importable function (the training script does).
* Failure: every process group gets a timeout (a hung collective raises within it); a rank that
  raises or dies fails the whole run at once with that rank's traceback, the other ranks are
  killed, and no process is left behind. ``LaunchError`` carries the reason.
* Deadlocks and hangs: each rank writes what it is waiting for (the call, its peer or group, the
  tensor, the code and, for a pipeline stage's method, the stage) into shared memory before every
  send, receive and collective (`waits.py`). When no rank failed with an error of its own and one
  timed out, the report is that of a deadlock (every unfinished rank was waiting) or a hang (a
  rank waited for one that was running other code or had finished), with every rank's wait, the
  same whichever rank's timer fired first; a rank's "Connection closed by peer" after another
  rank gave up is never the reason given.
"""
from __future__ import annotations

import datetime as _dt
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import sys
import time
import traceback
from typing import Any, Callable

import torch
import torch.distributed as dist

from . import waits as _waits

__all__ = ["LaunchError", "launch", "default_backend"]


class LaunchError(RuntimeError):
    """A distributed run failed: a rank raised, died, or the run exceeded its time limit."""


def default_backend(world_size: int) -> str:
    """"nccl" when CUDA has at least `world_size` GPUs, else "gloo"; `TAS_LAB_BACKEND=gloo` (or
    `nccl`) in the environment overrides the choice (the test suite pins gloo, so its CPU-tensor
    tests also run on a multi-GPU machine; the NCCL tests ask for NCCL by name)."""
    forced = os.environ.get("TAS_LAB_BACKEND", "").strip().lower()
    if forced:
        if forced not in ("gloo", "nccl"):
            raise ValueError(f"TAS_LAB_BACKEND must be 'gloo' or 'nccl', got {forced!r}")
        return forced
    if torch.cuda.is_available() and torch.cuda.device_count() >= world_size:
        return "nccl"
    return "gloo"


class _RendezvousError(LaunchError):
    """The ranks never formed a process group (a rank stuck or failing in start-up)."""


_PRELOADED: list[bool] = []


def _preload_for_fork() -> None:
    """Import, once in the parent, what every forked rank would otherwise import on its own.

    torch's first `tensor.backward(grad)` with an explicit gradient (a pipeline stage, a
    tensor-parallel output) imports `torch.fx.experimental.symbolic_shapes` and with it sympy:
    0.3-0.5 s, paid again by every rank of every launch, where it looks like a slow message
    (the peer waits). Imported here it is inherited by each fork for free."""
    if _PRELOADED:
        return
    _PRELOADED.append(True)
    try:
        import torch.fx.experimental.symbolic_shapes  # noqa: F401
    except Exception:  # noqa: BLE001 - another torch version may not have it; nothing to gain then
        pass


def _hide_cuda() -> None:
    """In a forked rank: CUDA is unusable here (the driver was initialised in the parent), so
    say so, or `torch.optim`'s step (its graph-capture check) and RNG snapshots call into CUDA
    and fail with "CUDA error: initialization error"."""
    torch.cuda.is_available = lambda: False


def _worker(rank, world_size, port_conn, backend, pg_timeout, threads, fn, args, kwargs, conn, forked=False,
            slots=None):
    stage = "init-error"
    try:
        if forked:
            _hide_cuda()
        if slots is not None:
            _waits.install(slots, rank)
        if threads:
            torch.set_num_threads(threads)
        if not port_conn.poll(pg_timeout):
            raise RuntimeError(f"no rendezvous port from the parent within {pg_timeout:g} s")
        port = port_conn.recv()
        store = dist.TCPStore("127.0.0.1", port, world_size + 1, is_master=False,
                              timeout=_dt.timedelta(seconds=pg_timeout))
        kw = {}
        if backend == "nccl":
            torch.cuda.set_device(rank)
            kw["device_id"] = torch.device("cuda", rank)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=_dt.timedelta(seconds=pg_timeout), **kw)
        stage = "error"
        _waits.mark_started()
        try:
            result = fn(rank, world_size, *args, **kwargs)
        finally:
            dist.destroy_process_group()
        # Plain pickle, not multiprocessing's: torch would pass a tensor as a shared-memory
        # handle that dies with this process.
        conn.send_bytes(pickle.dumps(("ok", result)))
    except BaseException:  # noqa: BLE001 - every failure must reach the parent
        try:
            conn.send_bytes(pickle.dumps((stage, traceback.format_exc())))
        finally:
            conn.close()
            os._exit(1)
    conn.close()
    os._exit(0)


def launch(fn: Callable[..., Any], world_size: int = 2, *, args: tuple = (), kwargs: dict | None = None,
           backend: str | None = None, timeout: float = 120.0, collective_timeout: float = 30.0,
           threads_per_rank: int | None = None, start_method: str | None = None,
           rendezvous_retries: int = 1) -> list[Any]:
    """Run ``fn(rank, world_size, *args, **kwargs)`` on `world_size` ranks; return the results by rank.

    timeout: seconds for the whole run (start-up included); collective_timeout: the process
    group's timeout, after which a collective that waits for a missing rank raises.
    threads_per_rank: torch intra-op threads per rank (default: 1 for a forked rank, else
        cores // world_size, at least 1). A forked rank with more than one thread hangs in its
        first parallel op once the parent has used OpenMP threads itself (GNU OpenMP's thread pool
        does not survive fork: measured here, a one-rank run with 2 threads after a 2-thread
        matmul in the parent never returned); ask for more threads only with
        start_method="spawn", or from a parent that has not computed with threads.
    rendezvous_retries: how often to start afresh when the ranks fail to form the process group
    (a rank stuck in start-up: forking a busy multi-threaded parent can, rarely, deadlock a
    child); a failure after start-up, in `fn`, is never retried.
    Results travel back by pickle (tensors included, by value), so return small values.
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    if timeout <= 0 or collective_timeout <= 0:
        raise ValueError("timeout and collective_timeout must be positive seconds")
    backend = backend or default_backend(world_size)
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl" and torch.cuda.device_count() < world_size:
        raise ValueError(f"NCCL needs {world_size} GPUs, found {torch.cuda.device_count()}")
    if start_method is None:
        start_method = "fork" if backend == "gloo" and sys.platform.startswith("linux") else "spawn"
    if start_method == "fork":
        _preload_for_fork()
    threads = threads_per_rank or (1 if start_method == "fork" else max(1, (os.cpu_count() or 1) // world_size))
    ctx = mp.get_context(start_method)
    for attempt in range(rendezvous_retries + 1):
        try:
            return _launch_once(ctx, fn, world_size, args, kwargs or {}, backend, timeout,
                                collective_timeout, threads)
        except _RendezvousError as e:
            if attempt == rendezvous_retries:
                raise LaunchError(f"the ranks could not form a process group ({attempt + 1} tries); "
                                  f"last error: {e}") from None


def _launch_once(ctx, fn, world_size, args, kwargs, backend, timeout, collective_timeout, threads):
    procs, conns, port_conns, store = [], [], [], None
    slots = ctx.RawArray("c", world_size * _waits.SLOT_BYTES)   # what each rank waits for (waits.py)
    try:
        # Fork every rank first, then open the store: no store thread exists while forking.
        for rank in range(world_size):
            parent_end, child_end = ctx.Pipe(duplex=False)
            port_child, port_parent = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, daemon=True,
                            args=(rank, world_size, port_child, backend, collective_timeout, threads,
                                  fn, args, kwargs, child_end, ctx.get_start_method() == "fork", slots))
            p.start()
            child_end.close()
            port_child.close()
            procs.append(p)
            conns.append(parent_end)
            port_conns.append(port_parent)
        store = dist.TCPStore("127.0.0.1", 0, world_size + 1, is_master=True, wait_for_workers=False,
                              timeout=_dt.timedelta(seconds=collective_timeout))
        for c in port_conns:
            c.send(store.port)
        return _collect(procs, conns, timeout, slots=slots, collective_timeout=collective_timeout)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(5)
        for c in conns + port_conns:
            c.close()
        del store


_STARTUP_LIMIT = 60.0   # seconds a rank may take from fork to its function before the run is started afresh
_PEER_SYMPTOMS = ("Connection closed by peer", "Connection reset by peer", "Timed out", "timed out")
_TIMEOUT_SYMPTOMS = ("Timed out", "timed out", "operation timeout")


def _collect(procs, conns, timeout, grace=1.0, slots=None, collective_timeout=None):
    """Results by rank, or LaunchError naming the rank that failed first.

    When one rank fails, its peers usually fail a moment later inside a collective
    ("connection closed by peer", a timeout). We wait `grace` seconds for those reports and
    blame, in order: a rank that died without a word, a rank whose error is its own, then the
    earliest report. When every report is a time-out or a closed connection, the run
    deadlocked or hung: `_wait_report` says what every rank was waiting for.
    """
    results: dict[int, Any] = {}
    failures: dict[int, tuple[int, float, str]] = {}
    start = time.monotonic()
    deadline = start + timeout
    startup_deadline = start + min(timeout, max(_STARTUP_LIMIT, 2 * (collective_timeout or 0)))
    pending = dict(enumerate(conns))
    while pending:
        now = time.monotonic()
        if failures and now >= min(f[1] for f in failures.values()) + grace:
            break
        if now >= startup_deadline and slots is not None and not failures:
            stuck = [r for r in sorted(pending) if not _waits.read(slots, r)]
            if stuck:
                raise _RendezvousError(f"ranks {stuck} had not started the function {now - start:.0f} s after "
                                       "launch (stuck in fork or process-group start-up)")
        if now >= deadline:
            if failures:
                break
            raise LaunchError(f"the run exceeded its {timeout:g} s limit; ranks still running: "
                              f"{sorted(pending)} (a hung collective or an endless loop?)"
                              + _waiting_lines(slots, sorted(pending)))
        ready = mpc.wait(list(pending.values()) + [procs[r].sentinel for r in pending],
                         timeout=min(deadline - now, 0.2))
        for rank, conn in list(pending.items()):
            if conn in ready or conn.poll():
                try:
                    status, payload = pickle.loads(conn.recv_bytes())
                except EOFError:
                    procs[rank].join(1)
                    status, payload = "died", _exit_reason(procs[rank])
                if status == "ok":
                    results[rank] = payload
                else:
                    own = status == "died" or not any(s in payload for s in _PEER_SYMPTOMS)
                    failures[rank] = (0 if status == "died" else 1 if own else 2, time.monotonic(),
                                      f"died without a result: {payload}" if status == "died" else payload,
                                      status)
                del pending[rank]
            elif procs[rank].sentinel in ready:
                procs[rank].join(1)
                if not conn.poll():
                    failures[rank] = (0, time.monotonic(),
                                      f"died without a result: {_exit_reason(procs[rank])}", "died")
                    del pending[rank]
    if failures:
        if slots is not None and min(f[0] for f in failures.values()) == 2 and \
                all(f[3] != "init-error" for f in failures.values()) and \
                (results or any(s in f[2] for f in failures.values() for s in _TIMEOUT_SYMPTOMS)):
            raise LaunchError(_wait_report(len(procs), slots, results, failures, collective_timeout))
        rank = min(failures, key=lambda r: failures[r][:2])
        text = failures[rank][2]
        others = sorted(set(failures) - {rank})
        also = f"\n(ranks {others} failed after it)" if others else ""
        verb = "" if text.startswith("died") else "failed:\n"
        if "autograd's threading in combination with fork" in text:
            text += ("\n(on a machine with a GPU a forked rank cannot run backward after the parent "
                     "ran one: launch(..., start_method='spawn') with an importable function)")
        error = _RendezvousError if failures[rank][3] == "init-error" else LaunchError
        raise error(f"rank {rank} {verb}{text}{also}")
    return [results[r] for r in range(len(procs))]


def _waiting_lines(slots, ranks) -> str:
    if slots is None:
        return ""
    lines = [f"  rank {r}: {_state_text(_waits.read(slots, r))}" for r in ranks]
    return "\n" + "\n".join(lines) if lines else ""


def _state_text(line: str) -> str:
    state, _, what = line.partition(" ")
    if state == "in":
        return f"waiting in {what}"
    if state == "post":
        return (f"running, or waiting in a work.wait(); its last message or collective call posted {what} "
                "(a non-blocking call: it is waited for later)")
    if state == "done":
        return f"running code that is not a message or collective (its last one, {what}, had returned)"
    if state == "up":
        return "running code that is not a message or collective (it had made none)"
    return "still starting up (fork, process group): it never reached the function"


def _wait_report(world: int, slots, results, failures, collective_timeout) -> str:
    """The report of a run in which no rank raised an error of its own and one timed out: for
    every rank, what it was waiting for (from `slots`), in rank order. A deadlock when every rank
    that had not finished was waiting in a message or collective, else a hang. Built from what
    the ranks wrote before their calls, it does not depend on which rank's timer fired first."""
    lines, waiting, other = [], [], []
    for r in range(world):
        line = _waits.read(slots, r)
        if r in results:
            lines.append(f"  rank {r}: had finished (returned its result)")
            other.append(r)
            continue
        state = line.partition(" ")[0]
        if state == "in" or (state == "post" and r in failures):
            waiting.append(r)
        else:
            other.append(r)
        lines.append(f"  rank {r}: {_state_text(line)}")
    first = min(waiting) if waiting else min(failures)
    limit = f"the {collective_timeout:g} s collective timeout" if collective_timeout else "the collective timeout"
    if not other:
        head = (f"rank {first} failed: deadlock: every rank waited for another and none could go on; they timed out "
                f"after {limit} (no rank raised an error of its own). What each rank was waiting for:")
        tail = ("A deadlock: a receive whose message is never sent, sends and receives that wait for each other in a "
                "cycle, or ranks that call different collectives (or the same ones in a different order).")
    elif not any(s in f[2] for f in failures.values() for s in _TIMEOUT_SYMPTOMS):
        head = (f"rank {first} failed: it waited for ranks {other}, which had finished without joining that message "
                "or collective (no rank raised an error of its own). What each rank was doing:")
        tail = ("A message that is never sent or a collective that not every rank calls: each receive needs its "
                "send, and every rank of the group must make the same collective calls in the same order.")
    else:
        head = (f"rank {first} failed: timed out after {limit} waiting for ranks {other}, which were not waiting "
                "for it: a hang (no rank raised an error of its own). What each rank was doing:")
        tail = ("A hang: a rank skipped a message or collective that the others wait for, or is stuck in other "
                "code (an endless loop, a long sleep).")
    return "\n".join([head] + lines + [tail])


def _exit_reason(p) -> str:
    code = p.exitcode
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"
