"""Asynchronous SGD, synchronous SGD and local SGD, simulated event by event (CH26-25).

A least-squares problem with a known optimum, f(x) = ||A x - b||^2 / (2n), and W simulated
workers with their own step times (seconds per minibatch gradient; fixed or exponentially
distributed around each worker's mean, seeded). What is measured, not assumed:

* async SGD (a parameter server): a worker reads x (version v_read), computes a minibatch
  gradient at that x, and when it finishes the server applies it at once, x <- x - lr * g.
  staleness = number of updates the server applied between that worker's read and its write.
  With W equal workers it settles at W - 1 (each of the others writes once per step of
  this one); in general worker w sees about sum_{v != w} tau_w / tau_v
  (`expected_staleness`). A staleness-damped rate lr / (1 + staleness) is an option.
* sync SGD: every step all W workers compute a gradient at the same x; the step ends when the
  slowest one does (wall time += max of the W step times, + comm_time_s per all-reduce); the
  averaged gradient is applied.
* local SGD (Lin et al., 2020): every worker runs H SGD steps on its own copy, then the copies
  are averaged (one all-reduce per H steps: communication rounds = steps / H).

Every simulator returns the times (s), the loss f(x) - f(x*) after each update, and what was
counted (updates, gradients computed, communication rounds, staleness).
"""
from __future__ import annotations

import heapq

import numpy as np

from .._checks import choice, non_negative, positive

__all__ = ["least_squares_problem", "excess_loss", "simulate_async_sgd", "simulate_sync_sgd",
           "simulate_local_sgd", "expected_staleness", "staleness_from_trace", "time_to_loss",
           "local_sgd_rank"]


def least_squares_problem(n: int = 512, dim: int = 10, noise: float = 0.5, seed: int = 0) -> dict:
    """A, b = A x_true + noise; x_star = the least-squares solution; f_star = f(x_star);
    L = the largest eigenvalue of A^T A / n (SGD is stable for lr < 2 / L roughly)."""
    positive("n", n, integer=True)
    positive("dim", dim, integer=True)
    non_negative("noise", noise)
    if n < dim:
        raise ValueError(f"need n >= dim for a unique optimum, got n={n}, dim={dim}")
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, dim)) * np.linspace(0.3, 1.5, dim)
    b = A @ rng.standard_normal(dim) + noise * rng.standard_normal(n)
    x_star = np.linalg.lstsq(A, b, rcond=None)[0]
    p = {"A": A, "b": b, "x_star": x_star}
    p["f_star"] = _f(p, x_star)
    p["L"] = float(np.linalg.eigvalsh(A.T @ A / n)[-1])
    return p


def _f(p, x) -> float:
    r = p["A"] @ x - p["b"]
    return float(r @ r) / (2 * len(r))


def excess_loss(problem: dict, x) -> float:
    """f(x) - f(x*) >= 0."""
    return _f(problem, np.asarray(x, dtype=np.float64)) - problem["f_star"]


def _grad(p, x, rows):
    A, b = p["A"][rows], p["b"][rows]
    return A.T @ (A @ x - b) / len(rows)


def _durations(step_times, jitter):
    tau = np.asarray(step_times, dtype=np.float64)
    if tau.ndim != 1 or len(tau) < 1 or not np.all(np.isfinite(tau)) or np.any(tau <= 0):
        raise ValueError(f"step_times must be a non-empty list of positive seconds, got {step_times!r}")
    choice("jitter", jitter, {"fixed", "exp"})
    return tau


def _draw(tau_w, jitter, rng):
    return tau_w if jitter == "fixed" else tau_w * rng.exponential()


def simulate_async_sgd(problem: dict, step_times, n_updates: int, lr: float, batch: int = 8, *,
                       jitter: str = "fixed", damping: bool = False, seed: int = 0) -> dict:
    """Parameter-server async SGD, event by event. Returns {"times", "losses" (excess loss after
    each update), "staleness" (per update), "worker" (who wrote), "trace" (list of
    (time, worker, "read"|"write") in the order they happened), "gradients" (= n_updates)}.
    Ties in time are broken by worker id. damping: apply lr / (1 + staleness)."""
    tau = _durations(step_times, jitter)
    positive("n_updates", n_updates, integer=True)
    positive("lr", lr)
    positive("batch", batch, integer=True)
    rng = np.random.default_rng(seed)
    n = len(problem["b"])
    x = np.zeros(problem["A"].shape[1])
    version = 0
    snap, read_v, heap, trace = {}, {}, [], []
    for w in range(len(tau)):
        snap[w], read_v[w] = x.copy(), 0
        trace.append((0.0, w, "read"))
        heapq.heappush(heap, (_draw(tau[w], jitter, rng), w))
    times, losses, stale, who = [], [], [], []
    while len(times) < n_updates:
        t, w = heapq.heappop(heap)
        s = version - read_v[w]
        g = _grad(problem, snap[w], rng.integers(0, n, batch))
        x = x - (lr / (1 + s) if damping else lr) * g
        version += 1
        trace.append((t, w, "write"))
        times.append(t), losses.append(excess_loss(problem, x)), stale.append(s), who.append(w)
        if not np.all(np.isfinite(x)):
            break
        snap[w], read_v[w] = x.copy(), version
        trace.append((t, w, "read"))
        heapq.heappush(heap, (t + _draw(tau[w], jitter, rng), w))
    return {"times": np.array(times), "losses": np.array(losses), "staleness": np.array(stale),
            "worker": np.array(who), "trace": trace, "gradients": len(times)}


def simulate_sync_sgd(problem: dict, step_times, n_steps: int, lr: float, batch: int = 8, *,
                      jitter: str = "fixed", comm_time_s: float = 0.0, seed: int = 0) -> dict:
    """Synchronous data-parallel SGD: each step every worker computes a `batch` gradient at the
    same x, the mean is applied; the step takes max_w(step time) + comm_time_s. Returns
    {"times", "losses", "rounds" (all-reduces = n_steps), "gradients" (= W * n_steps)}."""
    tau = _durations(step_times, jitter)
    positive("n_steps", n_steps, integer=True)
    positive("lr", lr)
    positive("batch", batch, integer=True)
    non_negative("comm_time_s", comm_time_s)
    rng = np.random.default_rng(seed)
    n, W = len(problem["b"]), len(tau)
    x = np.zeros(problem["A"].shape[1])
    t, times, losses = 0.0, [], []
    for _ in range(n_steps):
        t += max(_draw(tau[w], jitter, rng) for w in range(W)) + comm_time_s
        g = np.mean([_grad(problem, x, rng.integers(0, n, batch)) for _ in range(W)], axis=0)
        x = x - lr * g
        times.append(t), losses.append(excess_loss(problem, x))
        if not np.all(np.isfinite(x)):
            break
    return {"times": np.array(times), "losses": np.array(losses), "rounds": len(times),
            "gradients": W * len(times)}


def simulate_local_sgd(problem: dict, step_times, n_steps: int, H: int, lr: float, batch: int = 8, *,
                       jitter: str = "fixed", comm_time_s: float = 0.0, shards: str = "iid",
                       seed: int = 0) -> dict:
    """Local SGD: each worker takes H SGD steps on its own copy, then the W copies are averaged
    (one all-reduce). n_steps local steps per worker in all (a multiple of H). A round takes
    max_w(sum of w's H step times) + comm_time_s. shards: "iid" (every worker samples all rows) or
    "sorted" (worker w samples only its block of the rows sorted by b: non-iid data, so the
    copies drift apart during the H local steps). Returns {"times", "losses" (excess loss of the
    average, after each round), "rounds" (= n_steps / H), "gradients" (= W * n_steps)}."""
    tau = _durations(step_times, jitter)
    positive("n_steps", n_steps, integer=True)
    positive("H", H, integer=True)
    positive("lr", lr)
    positive("batch", batch, integer=True)
    non_negative("comm_time_s", comm_time_s)
    if n_steps % H:
        raise ValueError(f"n_steps ({n_steps}) must be a multiple of H ({H})")
    rng = np.random.default_rng(seed)
    choice("shards", shards, {"iid", "sorted"})
    n, W = len(problem["b"]), len(tau)
    if shards == "iid":
        pools = [np.arange(n)] * W
    else:
        pools = np.array_split(np.argsort(problem["b"]), W)
    x = np.zeros(problem["A"].shape[1])
    t, times, losses = 0.0, [], []
    for _ in range(n_steps // H):
        copies, busy = [], []
        for w in range(W):
            xw, tw = x.copy(), 0.0
            for _ in range(H):
                xw = xw - lr * _grad(problem, xw, rng.choice(pools[w], batch))
                tw += _draw(tau[w], jitter, rng)
            copies.append(xw), busy.append(tw)
        x = np.mean(copies, axis=0)
        t += max(busy) + comm_time_s
        times.append(t), losses.append(excess_loss(problem, x))
        if not np.all(np.isfinite(x)):
            break
    return {"times": np.array(times), "losses": np.array(losses), "rounds": len(times),
            "gradients": W * H * len(times)}


def expected_staleness(step_times) -> dict:
    """Steady-state staleness of async SGD with mean step times tau_w (fixed or exponential):
    worker w waits tau_w while worker v writes tau_w / tau_v times, so
    s_w = sum_{v != w} tau_w / tau_v. The mean over updates weights w by its write rate 1/tau_w:
    mean = sum_w s_w / tau_w / sum_w 1 / tau_w (= W - 1 for equal speeds).
    Returns {"per_worker": array, "mean": float}."""
    tau = _durations(step_times, "fixed")
    rate = 1 / tau
    per = tau * (rate.sum() - rate)
    return {"per_worker": per, "mean": float((per * rate).sum() / rate.sum())}


def staleness_from_trace(trace) -> list[int]:
    """Staleness of every write in an async trace [(time, worker, "read"|"write"), ...] (in the
    order the events happened): the number of writes, by any worker, after the writer's last
    read and before its write."""
    writes, last_read, out = 0, {}, []
    for ev in trace:
        if len(ev) != 3 or ev[2] not in ("read", "write"):
            raise ValueError(f"each event must be (time, worker, 'read'|'write'), got {ev!r}")
        _, w, kind = ev
        if kind == "read":
            last_read[w] = writes
        else:
            if w not in last_read:
                raise ValueError(f"worker {w} writes before it ever read the parameters")
            out.append(writes - last_read[w])
            writes += 1
    return out


def time_to_loss(times, losses, target: float) -> float:
    """First time (s) at which the loss is <= target; inf if never."""
    times, losses = np.asarray(times), np.asarray(losses)
    if times.shape != losses.shape:
        raise ValueError("times and losses must have the same length")
    hit = np.nonzero(losses <= target)[0]
    return float(times[hit[0]]) if len(hit) else float("inf")


def local_sgd_rank(rank: int, world_size: int, n_steps: int = 32, H: int = 4, lr: float = 0.05,
                   batch: int = 8, seed: int = 0) -> dict:
    """Rank function for `launch`: real local SGD over gloo on `least_squares_problem(seed)`.
    Each rank takes SGD steps on its own rows (rank::world_size) and all-reduces (averages) the
    parameters every H steps. Returns {"x": final parameters, "calls": all_reduce calls,
    "bytes": all_reduce bytes, "excess_loss": f(x) - f(x*)} (calls = n_steps / H)."""
    import torch
    import torch.distributed as dist

    from .counting import CommCounter

    positive("n_steps", n_steps, integer=True)
    positive("H", H, integer=True)
    if n_steps % H:
        raise ValueError(f"n_steps ({n_steps}) must be a multiple of H ({H})")
    p = least_squares_problem(seed=seed)
    A = torch.tensor(p["A"][rank::world_size])
    b = torch.tensor(p["b"][rank::world_size])
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.zeros(A.shape[1], dtype=torch.float64)
    with CommCounter() as comm:
        for step in range(1, n_steps + 1):
            rows = torch.randint(0, len(b), (batch,), generator=g)
            x -= lr * A[rows].T @ (A[rows] @ x - b[rows]) / batch
            if step % H == 0:
                dist.all_reduce(x)
                x /= world_size
    return {"x": x, "calls": comm.calls["all_reduce"], "bytes": comm.bytes["all_reduce"],
            "excess_loss": excess_loss(p, x.numpy())}
