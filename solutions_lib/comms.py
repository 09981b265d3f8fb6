"""Communication cost: the alpha-beta model of collectives, bus bandwidth, Amdahl's law,
overlap of communication with backward, the intra/inter-node bandwidth hierarchy, stragglers,
and a small gloo lab that measures all-reduce and fits alpha and beta to the measurement.

Units: sizes in bytes, times in seconds, bandwidths in bytes/s. ``n`` is the number of ranks
taking part. ``alpha`` is the fixed cost of one message (start-up latency, seconds) and
``bandwidth`` the bytes per second one rank can push through its link; the time of one message
of ``m`` bytes is ``alpha + m / bandwidth`` (Hockney's model; Thakur, Rabenseifner and Gropp,
"Optimization of Collective Communication Operations in MPICH", 2005). ``nbytes`` (the S of
the formulas) is always the size of the *full* buffer the collective is defined on: the
gradient of an all-reduce, the input of a reduce-scatter, the output of an all-gather (the
convention of NVIDIA's nccl-tests and of `solutions_lib.dist.CommCounter`).

Bad arguments (a world of zero ranks, a negative size or time, a negative latency, a
bandwidth that is not > 0, an unknown operation) raise ValueError with the reason.
"""
from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Iterable, Mapping, Sequence

import numpy as np

from ._checks import fraction, non_negative, positive

__all__ = [
    "alpha_beta_time", "ring_allreduce_time", "reduce_scatter_time", "all_gather_time",
    "tree_allreduce_time", "ring_allreduce_steps", "ring_allreduce_bytes_per_rank",
    "allreduce_crossover_bytes", "BUS_FACTORS", "algorithm_bandwidth", "bus_bandwidth",
    "amdahl_speedup", "amdahl_from_profile", "parallel_efficiency", "speedup_from_step_time",
    "steps_per_epoch", "overlap_step_time", "step_time_with_overlap", "bucketed_step_time", "bucket_comm_times",
    "hierarchical_allreduce_time", "flat_allreduce_time", "rabenseifner_allreduce_time", "harmonic_number",
    "expected_max_step_time", "straggler_slowdown", "simulate_straggler_steps",
    "fit_alpha_beta", "alpha_beta_report", "allreduce_timing_rank", "measure_allreduce",
    "allreduce_benchmark", "DEFAULT_SIZES",
]

#: 1 KiB to 64 MiB in powers of two: the sizes of the all-reduce lab.
DEFAULT_SIZES = tuple(2 ** k for k in range(10, 27))


# ---------------------------------------------------------------- validation


def _world(n, name: str = "n (number of ranks)") -> int:
    if isinstance(n, bool) or not isinstance(n, (Integral, Real)) or not math.isfinite(float(n)) \
            or float(n) != int(n):
        raise ValueError(f"{name} must be a whole number of ranks, got {n!r}")
    if n < 1:
        raise ValueError(f"{name} must be >= 1 (a world of zero ranks has no one to talk to), got {n!r}")
    return int(n)


def _link(nbytes, alpha, bandwidth) -> tuple[float, float, float]:
    non_negative("nbytes (message size in bytes)", nbytes)
    non_negative("alpha (latency per message, seconds)", alpha)
    positive("bandwidth (bytes per second)", bandwidth)
    return float(nbytes), float(alpha), float(bandwidth)


# ---------------------------------------------------------------- the alpha-beta model


def alpha_beta_time(nbytes: float, alpha: float, bandwidth: float) -> float:
    """``alpha + nbytes / bandwidth``: one transfer of `nbytes` (seconds).

    The latency-plus-payload model (Hockney 1994). Small messages pay mostly alpha
    (latency-bound), large ones mostly nbytes/bandwidth (bandwidth-bound); the two terms are
    equal at ``nbytes = alpha * bandwidth``.
    """
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    return alpha + nbytes / bandwidth


def reduce_scatter_time(n: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    """Ring reduce-scatter: ``(n-1) alpha + (n-1)/n * nbytes / bandwidth`` seconds.

    The buffer is cut into n chunks of nbytes/n; in each of n-1 steps every rank sends one
    chunk to its right neighbour, which adds it to its own copy. Afterwards rank r holds the
    full sum of one chunk. Each rank sends (n-1)/n of the buffer (Thakur et al. 2005).
    """
    n = _world(n)
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    return (n - 1) * alpha + (n - 1) / n * nbytes / bandwidth


def all_gather_time(n: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    """Ring all-gather of an `nbytes` output: ``(n-1) alpha + (n-1)/n * nbytes / bandwidth``.

    Every rank starts with one chunk of nbytes/n and forwards what it received last; after n-1
    steps every rank holds all n chunks.
    """
    n = _world(n)
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    return (n - 1) * alpha + (n - 1) / n * nbytes / bandwidth


def ring_allreduce_time(n: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    """Ring all-reduce: ``2(n-1) alpha + 2 (n-1)/n * nbytes / bandwidth`` seconds.

    A reduce-scatter followed by an all-gather (so this equals
    ``reduce_scatter_time + all_gather_time`` exactly): 2(n-1) steps, each moving a chunk of
    nbytes/n. The bandwidth term is within a factor (n-1)/n of the lower bound for any
    all-reduce (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
    workstations", 2009), which is why ring all-reduce is the default for large gradients.
    The latency term grows linearly with n.
    """
    return reduce_scatter_time(n, nbytes, alpha, bandwidth) + all_gather_time(n, nbytes, alpha, bandwidth)


def ring_allreduce_steps(n: int) -> int:
    """2(n-1): the communication steps of a ring all-reduce (n-1 reduce-scatter, n-1 all-gather)."""
    return 2 * (_world(n) - 1)


def ring_allreduce_bytes_per_rank(n: int, nbytes: float) -> float:
    """2 (n-1)/n * nbytes: what each rank sends (and receives) in a ring all-reduce."""
    n = _world(n)
    non_negative("nbytes", nbytes)
    return 2 * (n - 1) / n * float(nbytes)


def tree_allreduce_time(n: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    """Binomial-tree all-reduce, not pipelined: ``2 ceil(log2 n) (alpha + nbytes / bandwidth)``.

    A reduce up a binomial tree (in round k, ranks whose index has bit k set send their whole
    partial sum to the partner with that bit cleared) takes ceil(log2 n) rounds of one full
    message each; a broadcast back down takes as many. This is the ``T ~ alpha log N + beta S``
    shape: the latency term grows only with log n, but every round moves the whole buffer, so
    the bandwidth term is ~log2 n times the ring's. (NCCL's trees are pipelined in small chunks,
    which removes most of that penalty; this function is the textbook unpipelined version.)
    """
    n = _world(n)
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    rounds = math.ceil(math.log2(n)) if n > 1 else 0
    return 2 * rounds * (alpha + nbytes / bandwidth)


def rabenseifner_allreduce_time(n: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    """Rabenseifner's all-reduce: ``2 log2(n) alpha + 2 (n-1)/n * nbytes / bandwidth`` seconds.

    A reduce-scatter by recursive halving (round k: exchange half of the current part with the
    partner at distance n/2^k and keep the sum of the other half: log2 n rounds sending
    S/2, S/4, ..., S/n) followed by an all-gather by recursive doubling (the same rounds in
    reverse). Each rank sends (n-1)/n * S per phase, as much as in the ring, but in log2 n
    rounds instead of n-1: the ``T ~ alpha log N + beta S`` shape of a bandwidth-optimal,
    logarithmic-latency all-reduce (Thakur, Rabenseifner and Gropp, "Optimization of Collective
    Communication Operations in MPICH", 2005). Defined here for n a power of two; other n raise
    ``ValueError`` (MPICH first folds the r = n - 2^floor(log2 n) extra ranks into partners,
    which costs two more full-size steps).
    """
    n = _world(n)
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    if n & (n - 1):
        raise ValueError(f"rabenseifner_allreduce_time is defined for a power-of-two number of ranks, got n = {n}")
    rounds = n.bit_length() - 1
    return 2 * rounds * alpha + 2 * (n - 1) / n * nbytes / bandwidth


def allreduce_crossover_bytes(n: int, alpha: float, bandwidth: float) -> float:
    """The size below which the (unpipelined) tree all-reduce beats the ring, in bytes.

    Setting ring = tree, with L = ceil(log2 n):
    ``S* = (n - 1 - L) alpha bandwidth / (L - (n-1)/n)``. Below S* the job is latency-bound and
    the tree's log n rounds win; above it the ring's smaller volume wins. 0 when the ring is
    never slower (n <= 3, where L = n - 1: the tree saves no latency).
    """
    n = _world(n)
    non_negative("alpha", alpha)
    positive("bandwidth", bandwidth)
    if n <= 2:
        return 0.0
    L = math.ceil(math.log2(n))
    return max(0.0, (n - 1 - L) * float(alpha) * float(bandwidth) / (L - (n - 1) / n))


# ---------------------------------------------------------------- bus bandwidth (nccl-tests)

#: busbw = algbw * factor(n): NVIDIA nccl-tests, doc/PERFORMANCE.md ("Bus bandwidth").
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def algorithm_bandwidth(nbytes: float, seconds: float) -> float:
    """algbw = S / t (bytes per second), S the full buffer size (nccl-tests convention)."""
    non_negative("nbytes", nbytes)
    positive("seconds", seconds)
    return float(nbytes) / float(seconds)


def bus_bandwidth(op: str, nbytes: float, seconds: float, n: int) -> float:
    """busbw = algbw * factor: the per-rank link speed the measurement implies (bytes/s).

    Factors from NVIDIA nccl-tests, doc/PERFORMANCE.md: all_reduce 2(n-1)/n, reduce_scatter
    and all_gather (and all_to_all) (n-1)/n, broadcast and reduce 1. They undo the
    algorithm's volume per rank, so busbw can be compared with the hardware's link bandwidth
    whatever n is. `nbytes` is the full buffer (the input of a reduce-scatter, the output of an
    all-gather). Underscores or not, case does not matter: "allreduce" == "all_reduce".
    """
    key = str(op).lower().replace("-", "_")
    aliases = {"allreduce": "all_reduce", "reducescatter": "reduce_scatter", "allgather": "all_gather",
               "alltoall": "all_to_all"}
    key = aliases.get(key, key)
    if key not in BUS_FACTORS:
        raise ValueError(f"op must be one of {sorted(BUS_FACTORS)}, got {op!r}")
    n = _world(n)
    return algorithm_bandwidth(nbytes, seconds) * BUS_FACTORS[key](n)


# ---------------------------------------------------------------- Amdahl and scaling efficiency


def amdahl_speedup(parallel_fraction: float, n: float) -> float:
    """Amdahl's law: ``1 / ((1 - p) + p / n)`` (Amdahl 1967).

    p is the fraction of the one-worker time that divides perfectly over n workers; the rest
    runs at full length on every worker. ``n = math.inf`` gives the ceiling 1 / (1 - p).
    """
    fraction("parallel_fraction", parallel_fraction)
    if isinstance(n, bool) or not isinstance(n, (int, float, Integral, Real)) or math.isnan(float(n)) or n < 1:
        raise ValueError(f"n (number of workers) must be >= 1 (or math.inf), got {n!r}")
    p = float(parallel_fraction)
    if math.isinf(float(n)):
        return math.inf if p == 1.0 else 1.0 / (1.0 - p)
    return 1.0 / ((1.0 - p) + p / float(n))


def amdahl_from_profile(profile: Mapping[str, float], scalable: Iterable[str], n: float) -> float:
    """Amdahl's speedup of a step profile: ``total / (sum(serial parts) + sum(scalable parts) / n)``.

    `profile` maps part names to their time on one worker (seconds or ms: only ratios matter);
    the parts named in `scalable` divide by n, every other part keeps its full length. Equal
    to ``amdahl_speedup(sum(scalable)/total, n)``.

    Chapter 26, exercise 26.4: a step of compute 180, all-reduce 45, data 25, other 10 ms.
    "Communication and data loading scale perfectly" means their time divides by n like
    compute does, so only "other" is serial: p = 250/260, 260 / (10 + 250/4) = 3.59x on 4 GPUs
    (26x as n grows), against the measured 2.8x (efficiency 0.70). If the all-reduce kept its
    45 ms instead, the bound would be 260 / (55 + 205/4) = 2.45x.
    """
    if not profile:
        raise ValueError("profile must name at least one part of the step")
    for k, v in profile.items():
        non_negative(f"profile[{k!r}]", v)
    scalable = set(scalable)
    unknown = scalable - set(profile)
    if unknown:
        raise ValueError(f"scalable names parts that are not in the profile: {sorted(unknown)}")
    total = float(sum(profile.values()))
    positive("the total time of the profile", total)
    par = float(sum(profile[k] for k in scalable))
    amdahl_speedup(min(1.0, par / total), n)  # validates n
    if math.isinf(float(n)):
        return math.inf if par == total else total / (total - par)
    return total / ((total - par) + par / float(n))


def parallel_efficiency(speedup: float, n: int) -> float:
    """Speedup divided by workers: 1.0 is linear scaling (2.8x on 4 GPUs is 0.70)."""
    positive("speedup", speedup)
    n = _world(n, "n (number of workers)")
    return float(speedup) / n


def speedup_from_step_time(old_speedup: float, old_step: float, new_step: float) -> float:
    """The scaling speedup after an optimization that changes the step time only.

    Throughput is inversely proportional to the step time and the one-GPU baseline is unchanged,
    so ``new = old_speedup * old_step / new_step``.
    """
    positive("old_speedup", old_speedup)
    positive("old_step", old_step)
    positive("new_step", new_step)
    return float(old_speedup) * float(old_step) / float(new_step)


def steps_per_epoch(n_samples: int, global_batch: int, drop_last: bool = False) -> int:
    """Optimizer steps (= gradient all-reduces) per epoch: ceil(n/B), or floor(n/B) with drop_last.

    With a DistributedSampler every rank first gets ceil(n/world) samples (padded) and then
    its DataLoader batches them; for ImageNet on 8 ranks at 256 per rank that gives the same
    626 (625 with drop_last) as ceil/floor of 1,281,167 / 2048.
    """
    positive("n_samples", n_samples, integer=True)
    positive("global_batch", global_batch, integer=True)
    n, b = int(n_samples), int(global_batch)
    return n // b if drop_last else -(-n // b)


# ---------------------------------------------------------------- overlap (bucketed backward)


def overlap_step_time(t_compute: float, t_comm: float, overlap: float = 1.0) -> float:
    """``t_compute + t_comm - overlap * min(t_compute, t_comm)`` seconds.

    overlap = 0: communication after compute (the sum); overlap = 1: perfect overlap, the step
    takes ``max(t_compute, t_comm)``; in between, that fraction of the shorter one is hidden.
    """
    non_negative("t_compute", t_compute)
    non_negative("t_comm", t_comm)
    fraction("overlap", overlap)
    return float(t_compute) + float(t_comm) - float(overlap) * min(float(t_compute), float(t_comm))


step_time_with_overlap = overlap_step_time  # the name used in the course's design notes


def bucketed_step_time(t_forward: float, t_backward: float, comm_times: Sequence[float]) -> float:
    """End of the step when gradient buckets are all-reduced while backward still runs.

    Backward produces B = len(comm_times) buckets at even intervals: bucket i is ready at
    ``t_forward + (i+1) t_backward / B``. One communication stream sends them in order, each
    starting when it is ready and the previous one has finished:
    ``end_i = max(ready_i, end_{i-1}) + comm_times[i]``. Returns end_{B-1} (seconds), the time at
    which the optimizer may step. Between ``t_forward + t_backward + comm_times[-1]`` (everything
    but the last bucket hidden) and ``t_forward + t_backward/B + sum(comm_times)``. This is the
    schedule of PyTorch DDP's gradient buckets (Li et al., "PyTorch Distributed", VLDB 2020).
    """
    non_negative("t_forward", t_forward)
    non_negative("t_backward", t_backward)
    comm = [float(c) for c in comm_times]
    if not comm:
        raise ValueError("comm_times must hold at least one bucket")
    for i, c in enumerate(comm):
        non_negative(f"comm_times[{i}]", c)
    b = len(comm)
    end = 0.0
    for i, c in enumerate(comm):
        ready = float(t_forward) + (i + 1) * float(t_backward) / b
        end = max(ready, end) + c
    return end


def bucket_comm_times(n: int, nbytes: float, n_buckets: int, alpha: float, bandwidth: float) -> list[float]:
    """Ring all-reduce time of each of `n_buckets` equal buckets of an `nbytes` gradient.

    Every bucket pays the full latency 2(n-1) alpha, so many small buckets overlap better but
    cost more in total.
    """
    n_buckets = _world(n_buckets, "n_buckets")
    t = ring_allreduce_time(n, float(nbytes) / n_buckets, alpha, bandwidth)
    return [t] * n_buckets


# ---------------------------------------------------------------- bandwidth hierarchy


def hierarchical_allreduce_time(nodes: int, gpus_per_node: int, nbytes: float, alpha_intra: float,
                                bw_intra: float, alpha_inter: float, bw_inter: float) -> float:
    """Two-level all-reduce: intra-node reduce-scatter, inter-node ring all-reduce, intra-node all-gather.

    1. inside each node, a ring reduce-scatter over the g GPUs (fast links): each GPU ends with
       the node's sum of one 1/g slice;
    2. GPU j of every node all-reduces its slice (nbytes/g) with GPU j of the other nodes, over
       the slow links; the g slices travel in parallel, one per GPU (a rail-optimised network
       with one NIC per GPU, so every GPU has its own `bw_inter`);
    3. inside each node, a ring all-gather puts the full result on every GPU.

    ``RS(g, S; intra) + AR_ring(nodes, S/g; inter) + AG(g, S; intra)``. The slow links carry
    2(nodes-1)/nodes * S/g per GPU instead of 2(N-1)/N * S for a flat ring.
    """
    nodes = _world(nodes, "nodes")
    g = _world(gpus_per_node, "gpus_per_node")
    return (reduce_scatter_time(g, nbytes, alpha_intra, bw_intra)
            + ring_allreduce_time(nodes, float(nbytes) / g, alpha_inter, bw_inter)
            + all_gather_time(g, nbytes, alpha_intra, bw_intra))


def flat_allreduce_time(nodes: int, gpus_per_node: int, nbytes: float, alpha_intra: float,
                        bw_intra: float, alpha_inter: float, bw_inter: float, channels: int = 1) -> float:
    """Flat ring all-reduce over all nodes*gpus_per_node GPUs, in `channels` parallel rings.

    Every step of a ring moves one chunk over every hop at once, so when any hop crosses a
    node boundary (nodes > 1) the step takes the inter-node latency and bandwidth. With
    `channels` = c rings (NCCL's channels), each ring carries nbytes/c and leaves the node
    through its own network card, so c NICs per node work in parallel:
    ``2(N-1) alpha + 2 (N-1)/N * nbytes / (c * bandwidth)``, assuming the intra-node links carry
    the other hops without becoming the bottleneck. ``channels = gpus_per_node`` prices the
    flat ring with the same hardware (one NIC per GPU) as `hierarchical_allreduce_time`. One
    node: the plain intra-node ring.
    """
    nodes = _world(nodes, "nodes")
    g = _world(gpus_per_node, "gpus_per_node")
    c = _world(channels, "channels")
    _link(nbytes, alpha_intra, bw_intra)
    if nodes == 1:
        return ring_allreduce_time(g, nbytes, alpha_intra, bw_intra)
    return ring_allreduce_time(nodes * g, nbytes / c, max(alpha_intra, alpha_inter), min(bw_intra, bw_inter))


# ---------------------------------------------------------------- stragglers


def harmonic_number(n: int) -> float:
    """H_n = 1 + 1/2 + ... + 1/n (H_n ~ ln n + 0.5772 for large n)."""
    n = _world(n, "n")
    return float(math.fsum(1.0 / k for k in range(1, n + 1)))


def expected_max_step_time(t_base: float, mean_delay: float, n: int) -> float:
    """E[max_r T_r] for ``T_r = t_base + X_r``, X_r independent exponentials of mean `mean_delay`.

    A synchronous step ends when the slowest of n ranks ends. The maximum of n independent
    exponentials with mean tau has mean ``tau * H_n`` (H_n the n-th harmonic number: the gaps
    between order statistics are exponentials of means tau/n, tau/(n-1), ..., tau), so
    ``E[T_step] = t_base + tau H_n``: it grows like ln n without bound.
    """
    non_negative("t_base", t_base)
    non_negative("mean_delay", mean_delay)
    return float(t_base) + float(mean_delay) * harmonic_number(n)


def straggler_slowdown(t_base: float, mean_delay: float, n: int) -> float:
    """``E[max of n] / E[one rank]`` = (t_base + tau H_n) / (t_base + tau): the synchronous tax."""
    slowest = expected_max_step_time(t_base, mean_delay, n)  # validates the arguments
    one = float(t_base) + float(mean_delay)
    if one <= 0:
        raise ValueError("t_base + mean_delay must be > 0: a step that takes no time has no slowdown")
    return slowest / one


def simulate_straggler_steps(t_base: float, mean_delay: float, n: int, steps: int, seed: int = 0) -> np.ndarray:
    """Monte Carlo: `steps` synchronous step times max_r (t_base + X_r), X_r ~ Exp(mean_delay)."""
    non_negative("t_base", t_base)
    non_negative("mean_delay", mean_delay)
    n = _world(n, "n")
    steps = _world(steps, "steps")
    rng = np.random.default_rng(seed)
    return float(t_base) + rng.exponential(float(mean_delay), size=(steps, n)).max(axis=1)


# ---------------------------------------------------------------- fitting alpha and beta


def fit_alpha_beta(sizes_bytes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Fit ``t = alpha + S / bandwidth`` to measured times; returns (alpha seconds, bandwidth bytes/s).

    Weighted least squares on *relative* residuals: minimise ``sum(((alpha + S b - t) / t)^2)``
    over alpha and b = 1/bandwidth (rows of the linear system divided by t). Plain least squares
    would let a 64 MB point (tens of ms) outweigh a 1 KB point (tenths of ms) by 10^4 in the
    objective, and the latency would come out as noise; dividing by t makes every size count by
    its relative error, so both ends of a 1 KB..64 MB sweep fit. Equal to
    ``numpy.polyfit(S, t, 1, w=1/t)``.

    A latency cannot be negative: if the optimum has alpha < 0 (possible with noisy data and no
    latency to speak of), the best fit with alpha = 0 is returned instead. Times that do not
    grow with size (b <= 0) raise ValueError. For a ring all-reduce on n ranks the fitted
    alpha is 2(n-1) alpha_link and the fitted bandwidth is n / (2(n-1)) times the link's
    (for n = 2: alpha = 2 alpha_link, bandwidth = the link's).
    """
    S = np.asarray(sizes_bytes, dtype=np.float64).ravel()
    t = np.asarray(seconds, dtype=np.float64).ravel()
    if S.shape != t.shape:
        raise ValueError(f"sizes_bytes and seconds must have the same length, got {S.size} and {t.size}")
    if not (np.all(np.isfinite(S)) and np.all(np.isfinite(t))):
        raise ValueError("sizes_bytes and seconds must be finite numbers")
    if np.any(S < 0):
        raise ValueError(f"sizes must be >= 0 bytes, got {S[S < 0][0]:g}")
    if np.any(t <= 0):
        raise ValueError(f"times must be > 0 seconds, got {t[t <= 0][0]:g}")
    if np.unique(S).size < 2:
        raise ValueError("need at least two different sizes to separate latency from bandwidth")
    A = np.stack([np.ones_like(S), S], axis=1) / t[:, None]
    y = np.ones_like(t)
    (alpha, slope), *_ = np.linalg.lstsq(A, y, rcond=None)
    if alpha < 0:  # constrained optimum on the boundary alpha = 0: minimise sum((S b / t - 1)^2)
        x = S / t
        alpha, slope = 0.0, float(x.sum() / (x @ x))
    if slope <= 0:
        raise ValueError("the times do not grow with the size, so no bandwidth can be fitted "
                         f"(fitted seconds per byte = {slope:g})")
    return float(alpha), float(1.0 / slope)


def alpha_beta_report(sizes_bytes: Sequence[float], seconds: Sequence[float], fit_max_bytes: float) -> dict:
    """Fit on sizes <= fit_max_bytes, predict every size; relative errors (pred - meas) / meas.

    Returns ``{"alpha", "bandwidth", "fit_mask", "predicted", "rel_error"}`` (arrays over all sizes).
    """
    S = np.asarray(sizes_bytes, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    positive("fit_max_bytes", fit_max_bytes)
    mask = S <= fit_max_bytes
    alpha, bw = fit_alpha_beta(S[mask], t[mask])
    pred = alpha + S / bw
    return {"alpha": alpha, "bandwidth": bw, "fit_mask": mask, "predicted": pred, "rel_error": (pred - t) / t}


# ---------------------------------------------------------------- measuring gloo all-reduce


def _check_sizes(sizes) -> list[int]:
    out = []
    for s in sizes:
        positive("size (bytes)", s, integer=True)
        if int(s) % 4:
            raise ValueError(f"sizes must be whole float32 buffers (multiples of 4 bytes), got {s}")
        out.append(int(s))
    if not out:
        raise ValueError("sizes must hold at least one size")
    return out


def allreduce_timing_rank(rank: int, world_size: int, sizes: Sequence[int], repeats: int = 7,
                          warmup: int = 2) -> list[float]:
    """The per-rank body of the all-reduce lab (run it with `solutions_lib.dist.launch`).

    For each size: a float32 buffer of size/4 elements, `warmup` untimed all-reduces (first-use
    costs: connections, allocation), then `repeats` timed ones, each after a barrier so all
    ranks start together, timed with ``time.perf_counter``. Returns the median per size
    (seconds). It issues len(sizes) * (warmup + repeats) all-reduces and len(sizes) * repeats
    barriers.
    """
    import torch
    import torch.distributed as dist

    out = []
    for s in sizes:
        x = torch.ones(int(s) // 4, dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(x)
        times = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            times.append(time.perf_counter() - t0)
        out.append(float(np.median(times)))
    return out


def measure_allreduce(sizes: Sequence[int] = DEFAULT_SIZES, world_size: int = 2, repeats: int = 7,
                      warmup: int = 2, timeout: float = 120.0) -> np.ndarray:
    """Time gloo (or NCCL) all-reduce for each size on `world_size` local ranks (seconds).

    Runs `allreduce_timing_rank` on every rank with `solutions_lib.dist.launch` and returns, per
    size, the largest of the ranks' medians: a collective is done when its slowest rank is.
    On a 2-core CPU the 1 KiB..64 MiB sweep with 7 repeats takes about 2-3 s.
    """
    from solutions_lib.dist import launch

    sizes = _check_sizes(sizes)
    world_size = _world(world_size, "world_size")
    repeats = _world(repeats, "repeats")
    non_negative("warmup", warmup, integer=True)
    per_rank = launch(allreduce_timing_rank, world_size, args=(sizes, repeats, int(warmup)), timeout=timeout)
    return np.max(np.asarray(per_rank, dtype=np.float64), axis=0)


def allreduce_benchmark(sizes: Sequence[int] = DEFAULT_SIZES, fit_max_bytes: float = 8 * 2 ** 20,
                        world_size: int = 2, repeats: int = 7, warmup: int = 2) -> dict:
    """Measure all-reduce over `sizes`, fit alpha and bandwidth on sizes <= fit_max_bytes, predict the rest.

    Returns `alpha_beta_report`'s dict plus ``sizes``, ``measured`` (seconds), ``busbw``
    (nccl-tests bus bandwidth per size, bytes/s) and ``max_abs_error_held_out`` (the largest
    relative error of the prediction on sizes above fit_max_bytes; NaN when there are none).
    """
    sizes = _check_sizes(sizes)
    measured = measure_allreduce(sizes, world_size, repeats, warmup)
    report = alpha_beta_report(sizes, measured, fit_max_bytes)
    held = ~report["fit_mask"]
    report.update(sizes=np.asarray(sizes), measured=measured,
                  busbw=np.array([bus_bandwidth("all_reduce", s, t, world_size) for s, t in zip(sizes, measured)]),
                  max_abs_error_held_out=float(np.max(np.abs(report["rel_error"][held]))) if held.any() else math.nan)
    return report


# ================================================================ LES-6.1 extension: what NCCL does
# Pipelined double binary trees, the LL / LL128 / Simple protocols, and all-to-all (expert
# parallelism). Notebook 05 theory, section 3c. Everything below is an addition; nothing above
# depends on it.

__all__ += [
    "binary_tree_depth", "double_tree_chunks_per_round", "pipelined_tree_allreduce_time", "optimal_tree_chunks", "pipelined_tree_best_time",
    "PROTOCOL_EFFICIENCY", "EXAMPLE_PROTOCOL_LATENCIES", "protocol_time", "best_protocol",
    "protocol_crossover_bytes", "all_to_all_time", "moe_alltoall_bytes", "tp_allreduce_bytes_per_layer",
]


def binary_tree_depth(n: int) -> int:
    """D = ceil(log2(n+1)) - 1 = floor(log2 n): edges on the longest root-to-leaf path of the
    complete binary tree on n ranks (heap numbering: rank i has children 2i+1 and 2i+2)."""
    n = _world(n)
    return n.bit_length() - 1


def _chunks(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (Integral, Real)) or not math.isfinite(float(k)) \
            or float(k) != int(k) or k < 1:
        raise ValueError(f"chunks must be a whole number >= 1, got {k!r}")
    return int(k)


def double_tree_chunks_per_round(n: int) -> int:
    """Chunks the busiest rank sends in one steady-state round of the pipelined double tree.

    A rank at heap position p sends one chunk up (unless it is the root) and one down to each of
    its children; tree A puts rank r at position r, tree B at n-1-r, and a rank sends in both
    trees in the same round. For n >= 5 some rank is an inner node with two children in one tree
    (1 up + 2 down) and a leaf in the other (1 up): 4 chunks. With fewer ranks the trees are too
    small for that: n = 2 gives 2 (each rank is the root of one tree and the leaf of the other),
    n = 3 and n = 4 give 3. One rank sends nothing: 0.
    """
    n = _world(n)

    def sends(p: int) -> int:
        return int(p > 0) + sum(1 for c in (2 * p + 1, 2 * p + 2) if c < n)

    return 0 if n == 1 else max(sends(r) + sends(n - 1 - r) for r in range(n))


def pipelined_tree_allreduce_time(n: int, nbytes: float, alpha: float, bandwidth: float, chunks: int) -> float:
    """NCCL-style pipelined double-binary-tree all-reduce: ``(2D + k - 1)(alpha + c S / (2 k B))``.

    The model (stated in full in notebook 05 theory, section 3c):

    * two complementary binary trees on the n ranks (tree B is tree A mirrored, rank r at
      position n-1-r, so every rank is an inner node in at most one of them; Sanders, Speck and
      Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel
      Computing 2009; NCCL 2.4, "Massively Scale Your Deep Learning Training with NCCL 2.4",
      NVIDIA blog 2019; NCCL itself builds in-order trees, the second one mirrored for even n
      and shifted by one for odd n, with the same per-round cost for n >= 5). Each tree
      all-reduces one half of the buffer, S/2, cut into k chunks of S/(2k) bytes.
    * the reduce climbs the tree and the broadcast descends it, pipelined: in each round every
      tree edge carries at most one chunk each way, and a node forwards chunk j one round after it
      has chunk j from all its children (reduce) or from its parent (broadcast). The root starts
      broadcasting chunk j as soon as it has reduced it. The last chunk reaches the deepest leaf
      after 2D + k - 1 rounds (D = `binary_tree_depth(n)`).
    * one round costs one latency plus what the busiest rank sends through its link of
      bandwidth B (the same per-rank B as in `ring_allreduce_time`) in steady state:
      c = `double_tree_chunks_per_round(n)` chunks of S/(2k), ``alpha + c S / (2 k B)``. For
      n >= 5, c = 4 (an inner node sends one chunk up and two down in its own tree and one up as
      a leaf of the other): ``alpha + 2 S / (k B)``; n = 2 has c = 2 and n = 3, 4 have c = 3.

    k -> infinity gives the bandwidth term c S / (2B) (2 S / B for n >= 5, the ring's
    2 (n-1)/n S / B); k = 1 the unpipelined 2D (alpha + c S / (2B)). One rank: 0 seconds.
    """
    n = _world(n)
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    k = _chunks(chunks)
    if n == 1:
        return 0.0
    D = binary_tree_depth(n)
    c = double_tree_chunks_per_round(n)
    return (2 * D + k - 1) * (alpha + c * nbytes / (2 * k * bandwidth))


def optimal_tree_chunks(n: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    """The number of chunks that minimises `pipelined_tree_allreduce_time` over real k >= 1.

    T(k) = (a + k)(alpha + b / k) with a = 2D - 1 and b = c S / (2B) (c chunks per round,
    `double_tree_chunks_per_round`: 4, so b = 2S/B, for n >= 5); dT/dk = alpha - a b / k^2 = 0 at
    ``k* = sqrt((2D - 1) * b / alpha)``; T is convex in k > 0, so below k* = 1 the best
    allowed k is 1. The integer optimum is floor(k*) or ceil(k*). Needs n >= 2 (one rank has
    nothing to pipeline) and alpha > 0 (without latency every extra chunk helps: k* = infinity).
    """
    n = _world(n)
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    if n < 2:
        raise ValueError("optimal_tree_chunks needs n >= 2 ranks: one rank sends nothing to pipeline")
    if alpha <= 0:
        raise ValueError("optimal_tree_chunks needs alpha > 0: without latency every extra chunk helps (k* is infinite)")
    D = binary_tree_depth(n)
    b = double_tree_chunks_per_round(n) * nbytes / (2 * bandwidth)
    return max(1.0, math.sqrt((2 * D - 1) * b / alpha))


def pipelined_tree_best_time(n: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    """``T(k*) = (sqrt((2D-1) alpha) + sqrt(b))^2`` seconds with b = c S / (2B) (when k* > 1; else
    T(1) = 2D (alpha + b)); c = `double_tree_chunks_per_round(n)`, so b = 2S/B for n >= 5.

    Expanding: (2D-1) alpha + b + 2 sqrt((2D-1) alpha b). Small S: about (2D - 1) alpha,
    the tree's logarithmic latency; large S: b plus a term that grows only like sqrt(S), so
    the time per byte tends to the ring's. One rank: 0; alpha = 0: the limit b.
    """
    n = _world(n)
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    if n == 1:
        return 0.0
    D = binary_tree_depth(n)
    b = double_tree_chunks_per_round(n) * nbytes / (2 * bandwidth)
    if alpha == 0:
        return b
    if (2 * D - 1) * b <= alpha:  # k* <= 1: one chunk
        return 2 * D * (alpha + b)
    return (math.sqrt((2 * D - 1) * alpha) + math.sqrt(b)) ** 2


# ---------------------------------------------------------------- NCCL's protocols

#: Fraction of the bytes on the wire that are payload: a structural fact of each protocol.
#: LL ("low latency") stores 8-byte lines of 4 data bytes and a 4-byte flag, LL128 128-byte lines
#: of 120 data bytes and an 8-byte flag, Simple sends plain data and synchronises with memory
#: fences and a flag per step (NVIDIA NCCL, src/device/prims_ll.h, prims_ll128.h, prims_simple.h).
PROTOCOL_EFFICIENCY = {"LL": 4 / 8, "LL128": 120 / 128, "Simple": 1.0}

#: Illustrative per-step latencies (seconds): of the order of the NVLink per-hop latencies of
#: NCCL's own tuning model (src/graph/tuning.cc, hwLat: ring LL ~0.5 us, LL128 ~1.9 us, Simple
#: ~3.4 us). They are parameters, not facts: they depend on the hardware and the NCCL version.
EXAMPLE_PROTOCOL_LATENCIES = {"LL": 0.5e-6, "LL128": 2e-6, "Simple": 4e-6}

_RING_STEPS = {"all_reduce": lambda n: 2 * (n - 1), "reduce_scatter": lambda n: n - 1, "all_gather": lambda n: n - 1}
_RING_VOLUME = {"all_reduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
                "all_gather": lambda n: (n - 1) / n}


def _ring_op(op) -> str:
    key = str(op).lower().replace("-", "_")
    key = {"allreduce": "all_reduce", "reducescatter": "reduce_scatter", "allgather": "all_gather"}.get(key, key)
    if key not in _RING_STEPS:
        raise ValueError(f"op must be one of {sorted(_RING_STEPS)}, got {op!r}")
    return key


def _protocol(name) -> str:
    if name not in PROTOCOL_EFFICIENCY:
        raise ValueError(f"protocol must be one of {sorted(PROTOCOL_EFFICIENCY)}, got {name!r}")
    return name


def _latencies(latencies) -> dict:
    if not isinstance(latencies, Mapping) or not latencies:
        raise ValueError("latencies must be a non-empty dict {protocol name: seconds per step}")
    out = {}
    for name, lat in latencies.items():
        _protocol(name)
        non_negative(f"latencies[{name!r}] (seconds per step)", lat)
        out[name] = float(lat)
    return out


def protocol_time(op: str, n: int, nbytes: float, bandwidth: float, protocol: str, latency: float) -> float:
    """Ring collective `op` with NCCL protocol `protocol`: ``steps(n) * latency + volume(n) * S / (B * eff)``.

    steps and volume are the ring's: all_reduce 2(n-1) steps and 2(n-1)/n S per rank,
    reduce_scatter and all_gather n-1 and (n-1)/n S. eff = PROTOCOL_EFFICIENCY[protocol] (4/8,
    120/128, 1): the protocol puts S / eff bytes on the wire for S bytes of data. `latency` is
    the protocol's per-step latency (seconds), a parameter. One rank: 0.
    """
    key = _ring_op(op)
    n = _world(n)
    nbytes, latency, bandwidth = _link(nbytes, latency, bandwidth)
    eff = PROTOCOL_EFFICIENCY[_protocol(protocol)]
    return _RING_STEPS[key](n) * latency + _RING_VOLUME[key](n) * nbytes / (bandwidth * eff)


def best_protocol(op: str, n: int, nbytes: float, bandwidth: float, latencies: Mapping[str, float]) -> str:
    """The protocol of `latencies` ({name: per-step latency}) with the smallest `protocol_time`.

    Ties go to the protocol listed first in `latencies`. NCCL's tuner makes the same choice with
    its own latency and bandwidth tables (and caps LL's and LL128's bandwidth further).
    """
    key = _ring_op(op)
    lats = _latencies(latencies)
    best, best_t = None, math.inf
    for name, lat in lats.items():
        t = protocol_time(key, n, nbytes, bandwidth, name, lat)
        if t < best_t:
            best, best_t = name, t
    return best


def protocol_crossover_bytes(op: str, n: int, bandwidth: float, latencies: Mapping[str, float],
                             a: str, b: str) -> float:
    """The size S (bytes) at which protocols `a` and `b` take the same time.

    With lo the less efficient of the two and hi the other:
    ``S* = steps(n) (lat_hi - lat_lo) B / (volume(n) (1/eff_lo - 1/eff_hi))``: below S* the
    lower-latency protocol wins, above it the higher-efficiency one. 0 when the more efficient
    protocol is never slower (its latency is not higher) and for one rank. ValueError when a and
    b are the same protocol (they never cross).
    """
    key = _ring_op(op)
    n = _world(n)
    positive("bandwidth (bytes per second)", bandwidth)
    lats = _latencies(latencies)
    for name in (a, b):
        _protocol(name)
        if name not in lats:
            raise ValueError(f"latencies has no entry for protocol {name!r}")
    if a == b:
        raise ValueError(f"a and b must be two different protocols, got {a!r} twice")
    lo, hi = sorted((a, b), key=lambda p: PROTOCOL_EFFICIENCY[p])
    if n == 1:
        return 0.0
    num = _RING_STEPS[key](n) * (lats[hi] - lats[lo]) * float(bandwidth)
    den = _RING_VOLUME[key](n) * (1 / PROTOCOL_EFFICIENCY[lo] - 1 / PROTOCOL_EFFICIENCY[hi])
    return max(0.0, num / den)


# ---------------------------------------------------------------- all-to-all (expert parallelism)


def all_to_all_time(n: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    """Pairwise-exchange all-to-all: ``(n-1) alpha + (n-1)/n * nbytes / bandwidth`` seconds.

    Every rank holds `nbytes` (S) cut into n blocks of S/n, block j for rank j. In step
    s = 1..n-1 rank r sends block r+s to rank r+s and receives from rank r-s (mod n); its own
    block stays. n-1 messages of S/n each (Thakur, Rabenseifner and Gropp 2005). nccl-tests
    reports all-to-all busbw with the factor (n-1)/n for the same reason.
    """
    n = _world(n)
    nbytes, alpha, bandwidth = _link(nbytes, alpha, bandwidth)
    return (n - 1) * alpha + (n - 1) / n * nbytes / bandwidth


def moe_alltoall_bytes(tokens: int, top_k: int, hidden: int, bytes_per_element: float = 2,
                       backward: bool = True) -> float:
    """All-to-all buffer bytes of one MoE layer on one rank for one step: ``c * tokens * top_k * hidden * b``.

    Dispatch sends every token's hidden vector to each of its top_k experts (a buffer of
    tokens * top_k * hidden * b bytes), combine brings the expert outputs back (as many bytes):
    2 all-to-alls in the forward; the backward runs both again for the gradients: c = 4
    (c = 2 with backward=False). Under uniform routing over n expert-parallel ranks a fraction
    (n-1)/n of each buffer leaves the rank (`all_to_all_time` with nbytes = one buffer).
    """
    positive("tokens", tokens, integer=True)
    positive("top_k", top_k, integer=True)
    positive("hidden", hidden, integer=True)
    positive("bytes_per_element", bytes_per_element)
    return (4 if backward else 2) * float(tokens) * float(top_k) * float(hidden) * float(bytes_per_element)


def tp_allreduce_bytes_per_layer(tokens: int, hidden: int, tp: int, bytes_per_element: float = 2,
                                 blocks: int = 1, backward: bool = True) -> float:
    """Bytes each rank sends for the tensor-parallel all-reduces of `blocks` sharded blocks in one step.

    Megatron TP (Shoeybi et al. 2019) all-reduces the (tokens, hidden) activation once after each
    row-parallel block in the forward and once per block in the backward (the conjugate of the
    column-parallel input): ``(2 if backward else 1) * blocks * 2 (tp-1)/tp * tokens * hidden * b``
    with a ring all-reduce. blocks = 1: the MLP (FFN) of a layer, the block an MoE layer replaces;
    blocks = 2: attention and MLP.
    """
    positive("tokens", tokens, integer=True)
    positive("hidden", hidden, integer=True)
    tp = _world(tp, "tp (tensor-parallel ranks)")
    positive("bytes_per_element", bytes_per_element)
    positive("blocks", blocks, integer=True)
    return (2 if backward else 1) * int(blocks) * 2 * (tp - 1) / tp * float(tokens) * float(hidden) * float(bytes_per_element)
