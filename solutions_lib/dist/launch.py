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


def _worker(rank, world_size, port_conn, backend, pg_timeout, threads, fn, args, kwargs, conn, forked=False):
    stage = "init-error"
    try:
        if forked:
            _hide_cuda()
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
    threads_per_rank: torch intra-op threads per rank (default: cores // world_size, at least 1).
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
    threads = threads_per_rank or max(1, (os.cpu_count() or 1) // world_size)
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
    try:
        # Fork every rank first, then open the store: no store thread exists while forking.
        for rank in range(world_size):
            parent_end, child_end = ctx.Pipe(duplex=False)
            port_child, port_parent = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, daemon=True,
                            args=(rank, world_size, port_child, backend, collective_timeout, threads,
                                  fn, args, kwargs, child_end, ctx.get_start_method() == "fork"))
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
        return _collect(procs, conns, timeout)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(5)
        for c in conns + port_conns:
            c.close()
        del store


_PEER_SYMPTOMS = ("Connection closed by peer", "Connection reset by peer", "Timed out", "timed out")


def _collect(procs, conns, timeout, grace=1.0):
    """Results by rank, or LaunchError naming the rank that failed first.

    When one rank fails, its peers usually fail a moment later inside a collective
    ("connection closed by peer", a timeout). We wait `grace` seconds for those reports and
    blame, in order: a rank that died without a word, a rank whose error is its own, then the
    earliest report.
    """
    results: dict[int, Any] = {}
    failures: dict[int, tuple[int, float, str]] = {}
    deadline = time.monotonic() + timeout
    pending = dict(enumerate(conns))
    while pending:
        now = time.monotonic()
        if failures and now >= min(f[1] for f in failures.values()) + grace:
            break
        if now >= deadline:
            if failures:
                break
            raise LaunchError(f"the run exceeded its {timeout:g} s limit; ranks still running: "
                              f"{sorted(pending)} (a hung collective or an endless loop?)")
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


def _exit_reason(p) -> str:
    code = p.exitcode
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"
