"""When communication wins, measured: compute against communication on real gloo ranks (EXT-COMMBOUND).

The closed forms of `solutions_lib.parallel` (dp_crossover_tokens, tp_crossover_hidden, ...)
predict the per-device batch (data parallelism) and the layer width (tensor parallelism) below
which a strategy is communication-bound. This module measures the same two trends on the ranks
of the lab, one step at a time, with a barrier before every timed region so that a rank's
communication time does not include waiting for the other rank's compute:

    compute_s, comm_s, grad = time_dp_step(net, x, repeats)          # in a rank (DP)
    compute_s, comm_s, grads = time_tp_mlp(w1, w2, x, repeats)        # in a rank (TP)
    fit = dp_crossover_from(tokens, compute_s, comm_s)                 # in the notebook
    fit = tp_crossover_from(widths, compute_s, comm_s)

Data parallelism: compute grows linearly with the tokens per device (6 P FLOPs per token for a
network of P weights), the gradient all-reduce does not grow at all (2 (n-1)/n P e bytes per
rank), so the run is communication-bound below T* = t_comm / t_token. Tensor parallelism
(Megatron MLP, column then row): per step two all-reduces of T h values (the output forward,
the input gradient backward) against 6 * 8 h^2 T / t FLOPs, so comm / compute falls like 1/h.

`measure_dp_sweep` and `measure_tp_sweep` are the lab kit: they run a whole sweep on fresh
ranks (the notebook's fallback when a student's timing function is not written yet).
The timings are wall-clock on a shared CPU: read them as trends, not as speeds.
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

__all__ = ["dp_layer", "tp_shards", "time_dp_step", "time_tp_mlp", "dp_crossover_from", "tp_crossover_from",
           "predicted_dp_crossover", "measure_dp_sweep", "measure_tp_sweep"]


# ---------------------------------------------------------------- kit: models and shards


def dp_layer(hidden: int, seed: int = 0, dtype=torch.float32) -> nn.Sequential:
    """The MLP block of a transformer layer, Linear(h, 4h) -> GELU -> Linear(4h, h), seeded:
    P = 8 h^2 + 5 h parameters, 6 P FLOPs per token for forward + backward (matmuls)."""
    g = torch.Generator().manual_seed(seed)
    net = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
    return net.to(dtype)


def tp_shards(hidden: int, rank: int, world: int, seed: int = 0, dtype=torch.float32):
    """Rank `rank`'s shards of the bias-free MLP y = gelu(x W1^T) W2^T, W1 (4h, h), W2 (h, 4h):
    rows rank*k .. (rank+1)*k - 1 of W1 (column-parallel) and the same columns of W2
    (row-parallel), k = 4h / world. Returns (w1_shard, w2_shard, W1, W2), shards as leaf
    tensors that require grad."""
    if (4 * hidden) % world:
        raise ValueError(f"world size {world} must divide 4 * hidden = {4 * hidden}")
    g = torch.Generator().manual_seed(seed)
    W1 = (torch.randn(4 * hidden, hidden, generator=g) / math.sqrt(hidden)).to(dtype)
    W2 = (torch.randn(hidden, 4 * hidden, generator=g) / math.sqrt(4 * hidden)).to(dtype)
    k = 4 * hidden // world
    w1 = W1[rank * k:(rank + 1) * k].clone().requires_grad_(True)
    w2 = W2[:, rank * k:(rank + 1) * k].clone().requires_grad_(True)
    return w1, w2, W1, W2


def _median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=np.float64)))


def _device_done(*tensors) -> None:
    """Wait until the device has run every kernel queued so far, before the clock is read.

    CUDA kernels (and NCCL collectives) run asynchronously: `loss.backward()` and
    `dist.all_reduce` return once their work is queued, so a clock read right after them times
    the launches, not the work. On the CPU (gloo) this does nothing."""
    for t in tensors:
        if t is not None and t.is_cuda:
            torch.cuda.synchronize(t.device)
            return


def _check_repeats(repeats) -> int:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    return repeats


# ---------------------------------------------------------------- the two timed steps (run in a rank)


def _dp_step_timings(net, x, repeats):
    repeats = _check_repeats(repeats)
    params = [p for p in net.parameters() if p.requires_grad]
    world = dist.get_world_size()
    compute, comm, flat = [], [], None
    for step in range(repeats + 1):              # step 0 warms up and is not timed
        for p in params:
            p.grad = None
        dist.barrier()
        _device_done(x)
        t0 = time.perf_counter()
        net(x).square().mean().backward()
        _device_done(x)
        t1 = time.perf_counter()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.barrier()
        _device_done(flat)
        t2 = time.perf_counter()
        dist.all_reduce(flat)
        _device_done(flat)
        t3 = time.perf_counter()
        flat /= world
        if step:
            compute.append(t1 - t0)
            comm.append(t3 - t2)
    return _median(compute), _median(comm), flat


def time_dp_step(net, x, repeats):
    """One data-parallel step, timed in parts, `repeats` times after one untimed warm-up step.

    Each step: zero the gradients; barrier; time forward + backward of loss = mean(net(x)^2)
    (compute); flatten the gradients into one buffer; barrier; time one all-reduce (SUM) of the
    buffer (comm); divide by the world size. Returns (median compute seconds, median comm
    seconds, the averaged flat gradient of the last step): repeats + 1 all-reduces of P
    elements in all.
    """
    return _dp_step_timings(net, x, repeats)


def _tp_step_timings(w1, w2, x, repeats, group=None):
    repeats = _check_repeats(repeats)
    compute, comm = [], []
    gx = None
    for step in range(repeats + 1):
        for t in (w1, w2, x):
            t.grad = None
        dist.barrier(group=group)
        _device_done(x)
        t0 = time.perf_counter()
        z = F.gelu(x @ w1.T) @ w2.T                  # this rank's partial sum of the output
        _device_done(z)
        t1 = time.perf_counter()
        y = z.detach().clone()
        dist.barrier(group=group)
        _device_done(y)
        t2 = time.perf_counter()
        dist.all_reduce(y, group=group)               # g: the full output on every rank
        _device_done(y)
        t3 = time.perf_counter()
        dist.barrier(group=group)
        _device_done(y)
        t4 = time.perf_counter()
        z.backward(2 * y / y.numel())                 # d mean(y^2) / dy, identity through g
        _device_done(x)
        t5 = time.perf_counter()
        gx = x.grad.clone()
        dist.barrier(group=group)
        _device_done(gx)
        t6 = time.perf_counter()
        dist.all_reduce(gx, group=group)              # f's backward: the full input gradient
        _device_done(gx)
        t7 = time.perf_counter()
        if step:
            compute.append((t1 - t0) + (t5 - t4))
            comm.append((t3 - t2) + (t7 - t6))
    return _median(compute), _median(comm), {"w1": w1.grad.clone(), "w2": w2.grad.clone(), "x": gx}


def time_tp_mlp(w1, w2, x, repeats, group=None):
    """One tensor-parallel MLP step (Megatron column then row), timed in parts, `repeats` times
    after one untimed warm-up step.

    This rank holds w1 (k, h) and w2 (h, k), k = 4h / t. Forward: z = gelu(x w1^T) w2^T (compute),
    one all-reduce of a copy of z gives the output y (comm). Backward of loss = mean(y^2):
    z.backward(2 y / numel(y)) (compute), one all-reduce of a copy of x.grad gives the full
    input gradient (comm). A barrier precedes every timed region. Returns (median compute
    seconds, median comm seconds, {"w1", "w2": this rank's weight gradients, "x": the full
    input gradient}) of the last step: 2 (repeats + 1) all-reduces of T h elements.
    """
    return _tp_step_timings(w1, w2, x, repeats, group)


# ---------------------------------------------------------------- fits (in the notebook)


def _series(name, values, n=None, positive=True):
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1 or a.size < 2:
        raise ValueError(f"{name} must be a 1-D sequence of at least 2 numbers, got shape {a.shape}")
    if n is not None and a.size != n:
        raise ValueError(f"{name} has {a.size} entries, expected {n} (one per point)")
    if not np.all(np.isfinite(a)) or (positive and np.any(a <= 0)):
        raise ValueError(f"{name} must be finite and > 0, got {a.tolist()}")
    return a


def dp_crossover_from(tokens, compute_s, comm_s) -> dict:
    """Where measured data parallelism turns compute-bound.

    Least-squares line compute = c0 + c1 T through the (tokens, compute_s) points; comm = the
    median of comm_s (the all-reduce does not depend on T); crossover T* = (comm - c0) / c1,
    0 when the overhead c0 alone exceeds comm. Returns {"overhead_s": c0, "per_token_s": c1,
    "comm_s": comm, "crossover_tokens": T*}. ValueError for fewer than 2 distinct token counts,
    mismatched lengths, times <= 0, or a fitted slope <= 0 (compute did not grow with T).
    """
    T = _series("tokens", tokens)
    c = _series("compute_s", compute_s, T.size)
    m = _series("comm_s", comm_s, T.size)
    if np.unique(T).size < 2:
        raise ValueError("tokens needs at least 2 distinct values to fit a line")
    c1, c0 = np.polyfit(T, c, 1)
    if not c1 > 0:
        raise ValueError(f"compute time does not grow with tokens (fitted slope {c1:.3g} s/token): "
                         "re-measure with a wider range of tokens")
    comm = _median(m)
    return {"overhead_s": float(c0), "per_token_s": float(c1), "comm_s": comm,
            "crossover_tokens": float(max(0.0, (comm - c0) / c1))}


def tp_crossover_from(widths, compute_s, comm_s) -> dict:
    """Where measured tensor parallelism turns compute-bound.

    compute = a h^2 (least squares through the origin: a = sum(c h^2) / sum(h^4)); comm = b0 + b1 h
    (least-squares line); crossover h* = the positive root of a h^2 = b0 + b1 h,
    (b1 + sqrt(b1^2 + 4 a b0)) / (2 a), 0 when b1^2 + 4 a b0 < 0 (compute wins at every width).
    Returns {"compute_per_h2_s": a, "comm_intercept_s": b0, "comm_per_width_s": b1,
    "crossover_width": h*}. ValueError as for dp_crossover_from.
    """
    h = _series("widths", widths)
    c = _series("compute_s", compute_s, h.size)
    m = _series("comm_s", comm_s, h.size)
    if np.unique(h).size < 2:
        raise ValueError("widths needs at least 2 distinct values to fit a line")
    a = float(np.sum(c * h ** 2) / np.sum(h ** 4))
    b1, b0 = np.polyfit(h, m, 1)
    disc = b1 * b1 + 4 * a * b0
    root = 0.0 if disc < 0 else max(0.0, (b1 + math.sqrt(disc)) / (2 * a))
    return {"compute_per_h2_s": a, "comm_intercept_s": float(b0), "comm_per_width_s": float(b1),
            "crossover_width": float(root)}


def predicted_dp_crossover(n_params, world_size, alpha, bandwidth, flops_per_s, bytes_per_element=4) -> float:
    """Tokens per device T* at which the predicted gradient all-reduce equals the compute.

    comm = 2 (n-1) alpha + 2 (n-1)/n P e / B (ring all-reduce, 05); compute = 6 P T / F (06);
    T* = comm F / (6 P). With alpha = 0 this is (n-1)/n e F / (3 B): independent of P.
    """
    for name, v in (("n_params", n_params), ("world_size", world_size)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    for name, v, ok in (("alpha", alpha, lambda v: v >= 0), ("bandwidth", bandwidth, lambda v: v > 0),
                        ("flops_per_s", flops_per_s, lambda v: v > 0),
                        ("bytes_per_element", bytes_per_element, lambda v: v > 0)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v) \
                or not ok(v):
            raise ValueError(f"{name} must be a finite number {'>= 0' if name == 'alpha' else '> 0'}, got {v!r}")
    n, P = int(world_size), int(n_params)
    comm = 2 * (n - 1) * alpha + 2 * (n - 1) / n * P * bytes_per_element / bandwidth
    return float(comm * flops_per_s / (6 * P))


# ---------------------------------------------------------------- kit: whole sweeps on fresh ranks


def _dp_sweep_rank(rank, world, tokens, hidden, repeats, seed):
    torch.manual_seed(seed + rank)
    net = dp_layer(hidden, seed)
    rows = []
    for T in tokens:
        x = torch.randn(T, hidden)
        c, m, _ = _dp_step_timings(net, x, repeats)
        rows.append((c, m))
    return rows


def _tp_sweep_rank(rank, world, widths, tokens, repeats, seed):
    rows = []
    for h in widths:
        w1, w2, _, _ = tp_shards(h, rank, world, seed)
        x = torch.randn(tokens, h, generator=torch.Generator().manual_seed(seed + 1)).requires_grad_(True)
        c, m, _ = _tp_step_timings(w1, w2, x, repeats)
        rows.append((c, m))
    return rows


def _sweep(rank_fn, knob, values, args, world_size):
    from .launch import launch

    per_rank = launch(rank_fn, world_size, args=args)
    # a step lasts as long as its slowest rank: take the max over ranks of each median
    compute = [max(r[i][0] for r in per_rank) for i in range(len(values))]
    comm = [max(r[i][1] for r in per_rank) for i in range(len(values))]
    return {knob: [int(v) for v in values], "compute_s": compute, "comm_s": comm}


def measure_dp_sweep(tokens=(4, 8, 16, 32, 64, 128, 256, 512), hidden=256, repeats=5, world_size=2, seed=0) -> dict:
    """Data parallelism over `world_size` gloo ranks, one `dp_layer(hidden)`: per token count,
    the medians of compute and comm seconds (max over ranks). {"tokens", "compute_s", "comm_s"}."""
    return _sweep(_dp_sweep_rank, "tokens", tokens, (list(tokens), hidden, repeats, seed), world_size)


def measure_tp_sweep(widths=(64, 96, 128, 192, 256, 384, 512), tokens=128, repeats=5, world_size=2, seed=0) -> dict:
    """Tensor parallelism over `world_size` gloo ranks, the bias-free MLP of `tp_shards`: per
    width, the medians of compute and comm seconds (max over ranks). {"widths", "compute_s", "comm_s"}."""
    return _sweep(_tp_sweep_rank, "widths", widths, (list(widths), tokens, repeats, seed), world_size)
