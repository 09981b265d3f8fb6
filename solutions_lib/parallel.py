"""Parallelism arithmetic and a small lab: pipeline bubbles (closed forms and a schedule
simulator), tensor-parallel shards and communication volume, data-parallel gradient traffic,
sharded-state memory per rank, and a real column-then-row-parallel MLP on torch.distributed.

Conventions
-----------
* Times in the simulator are in any unit you like (``t_fwd`` and ``t_bwd`` are the forward and
  backward time of one micro-batch through one *whole* stage); fractions are dimensionless.
* Weights are stored ``(in_features, out_features)`` and applied as ``y = x @ W`` (the math
  convention of the Megatron paper). ``torch.nn.Linear`` stores the transpose ``(out, in)``.
* Bytes: "payload" is the size ``S`` of the buffer a collective is defined on (what
  ``solutions_lib.dist.CommCounter`` counts); "wire" is what one rank sends with a ring
  all-reduce, ``2 (n - 1) / n * S`` (Patarasuk & Yuan 2009). Every byte function takes
  ``measure="payload"`` (default) or ``measure="wire"``.

Bubble denominators
-------------------
The pipeline bubble is quoted two ways in the literature, and they differ a lot for small
``m``:

* ``denominator="total"``: idle time / total step time, the fraction of the step the devices
  sit idle: GPipe and 1F1B ``(p - 1) / (m + p - 1)`` (Huang et al. 2019, GPipe).
* ``denominator="ideal"``: idle time / ideal (bubble-free) time: ``(p - 1) / m``, and
  ``(p - 1) / (v m)`` with ``v`` interleaved chunks per device (Narayanan et al. 2021,
  "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", sec. 2.2).

They convert as ``ideal = total / (1 - total)`` and ``total = ideal / (1 + ideal)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import comms as _comms
from . import compute as _compute
from . import planner_terms as _pt
from ._checks import count as _int
from ._checks import positive_real as _pos

__all__ = [
    "SCHEDULES", "pipeline_bubble_fraction", "pipeline_bubble_ratio", "min_micro_batches_for_bubble",
    "pipeline_peak_activations", "PipelineTimeline", "simulate_pipeline", "plot_pipeline",
    "SIM_SCHEDULES", "pipeline_bubble_zb_h1",
    "column_parallel_shard", "row_parallel_shard", "shard_columns", "shard_rows", "heads_per_rank",
    "tp_comm_bytes_per_layer", "dp_comm_bytes_per_step", "tp_dp_breakeven_tokens",
    "transformer_layer_params", "sharding_bytes_per_rank", "SHARDING_STRATEGIES",
    "copy_to_tensor_parallel", "reduce_from_tensor_parallel", "mlp_reference",
    "split_mlp_weights", "ColumnRowParallelMLP", "run_tp_mlp",
    "dp_comm_compute_times", "dp_crossover_tokens", "tp_comm_compute_times", "tp_crossover_hidden",
    "pp_comm_compute_times", "pp_crossover_tokens",
    "LAYOUT_KEYS", "COMM_AXES", "make_layout", "layer_comm_bytes", "layout_memory_per_rank", "layout_step_time",
    "candidate_layouts", "best_layout",
]

SCHEDULES = ("gpipe", "1f1b", "interleaved")
# the simulator also runs the zero-bubble schedule ZB-H1 (Qi et al. 2024), whose backward is split
SIM_SCHEDULES = SCHEDULES + ("zb-h1",)


# ---------------------------------------------------------------- validation


def _schedule(stages, micro_batches, schedule, chunks):
    p = _int("stages", stages)
    m = _int("micro_batches", micro_batches)
    v = _int("chunks", chunks)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if schedule != "interleaved" and v != 1:
        raise ValueError(f"chunks={v} needs schedule='interleaved' (GPipe and 1F1B hold one model chunk per stage)")
    if schedule == "interleaved" and m % p:
        raise ValueError(f"the interleaved schedule sends micro-batches through in groups of `stages`: "
                         f"micro_batches={m} must be a multiple of stages={p}")
    return p, m, v


def _measure(measure: str) -> str:
    if measure not in ("payload", "wire"):
        raise ValueError(f"measure must be 'payload' (buffer size S) or 'wire' (ring bytes sent per rank), got {measure!r}")
    return measure


def _ring_factor(n: int) -> Fraction:
    return Fraction(2 * (n - 1), n)


# ---------------------------------------------------------------- pipeline: closed forms


def pipeline_bubble_fraction(stages, micro_batches, schedule="gpipe", chunks=1, denominator="total") -> float:
    """Pipeline bubble of one training step with `stages` = p devices and `micro_batches` = m.

    denominator="total" (default): idle time / total step time, the idle fraction.
        GPipe and 1F1B: (p-1)/(m+p-1). Interleaved with v = `chunks`: (p-1)/(v m + p-1).
    denominator="ideal": idle time / ideal time m (t_f + t_b), Megatron's convention.
        GPipe and 1F1B: (p-1)/m. Interleaved: (p-1)/(v m).
    GPipe and 1F1B (PipeDream-Flush) have the same bubble; 1F1B only lowers activation memory.
    The interleaved schedule needs m to be a multiple of p (as in Megatron-LM).
    Source: Huang et al. 2019 (GPipe); Narayanan et al. 2021 (Megatron-LM, sec. 2.2).
    """
    p, m, v = _schedule(stages, micro_batches, schedule, chunks)
    if denominator == "total":
        return (p - 1) / (v * m + p - 1)
    if denominator == "ideal":
        return (p - 1) / (v * m)
    raise ValueError(f"denominator must be 'total' (idle / step time) or 'ideal' (idle / bubble-free time), got {denominator!r}")


def pipeline_bubble_ratio(stages, micro_batches, schedule="gpipe", chunks=1) -> float:
    """Megatron's bubble: idle time / ideal time, (p-1)/m, or (p-1)/(v m) interleaved.
    Same as ``pipeline_bubble_fraction(..., denominator="ideal")``."""
    return pipeline_bubble_fraction(stages, micro_batches, schedule, chunks, denominator="ideal")


def min_micro_batches_for_bubble(stages, target, schedule="gpipe", chunks=1, denominator="total") -> int:
    """Smallest m whose bubble is strictly below `target` (a fraction in (0, 1)).

    total: (p-1)/(v m + p-1) < f  <=>  m > (p-1)(1-f)/(v f);  ideal: (p-1)/(v m) < f <=> m > (p-1)/(v f).
    Exact rational arithmetic on the decimal value of `target` (0.1 means 1/10), so a bubble of
    exactly 10% does not count as below 10%. The interleaved result is rounded up to a multiple of p.
    With one stage there is no bubble and the answer is 1.
    """
    p = _int("stages", stages)
    v = _int("chunks", chunks)
    f = _pos("target", target)
    if f >= 1:
        raise ValueError(f"target must be a fraction below 1, got {target!r}")
    _schedule(p, p, schedule, v)  # checks the schedule name and chunks
    if denominator not in ("total", "ideal"):
        raise ValueError(f"denominator must be 'total' or 'ideal', got {denominator!r}")
    fr = Fraction(repr(float(f)))
    bound = (p - 1) * (1 - fr) / (v * fr) if denominator == "total" else Fraction(p - 1) / (v * fr)
    m = max(1, math.floor(bound) + 1)
    if schedule == "interleaved":
        m = -(-m // p) * p
    return m


def pipeline_peak_activations(stages, micro_batches, schedule="gpipe", chunks=1, stage=0) -> float:
    """Peak number of micro-batches whose activations `stage` holds at once (multiply by the
    activation memory A of one micro-batch on one stage to get bytes).

    GPipe: m on every stage (all forwards run before the first backward).
    1F1B: min(p - stage, m); the first stage holds the most, min(p, m).
    Interleaved (Megatron-LM schedule): in units of chunk activations (A / v each) the device
    holds min(2 (p - stage - 1) + (v - 1) p + 1, v m), or v m when m == p (Megatron then runs
    all forwards first); returned divided by v, i.e. in units of A.
    """
    p, m, v = _schedule(stages, micro_batches, schedule, chunks)
    s = _int("stage", stage, 0)
    if s >= p:
        raise ValueError(f"stage must be in 0..{p - 1}, got {s}")
    if schedule == "gpipe":
        return float(m)
    if schedule == "1f1b":
        return float(min(p - s, m))
    if m == p:
        return float(m)
    return min(2 * (p - s - 1) + (v - 1) * p + 1, v * m) / v


def pipeline_bubble_zb_h1(stages, micro_batches, t_f, t_b, t_w) -> float:
    """Idle time of each device in one ZB-H1 step (Qi, Wan, Huang & Lin, "Zero Bubble Pipeline
    Parallelism", ICLR 2024), in the unit of the op times, for m >= p micro-batches.

    The backward is split into B (gradient w.r.t. the stage's input, t_b) and W (gradient w.r.t.
    its weights, t_w). 1F1B with the backward in one piece idles (p-1)(t_f + t_b + t_w) per
    device; ZB-H1 idles
        (p-1)(t_f + t_b - min(t_w, t_f, t_b)),
    which is the paper's (p-1)(T_F + T_B - T_W) (its Table 2) whenever t_w <= min(t_f, t_b).
    Why: every device does the same work m (t_f + t_b + t_w), so all idle the same time. The last
    stage waits (p-1) t_f for the first forward to arrive; after its last B it still owes p W's
    (p t_w) while that B climbs the p-1 stages above ((p-1) t_b) and stage 0 runs its last W
    (t_w): (p-1) t_f + (p-1) t_b + t_w - p t_w. No schedule of W's can go below the waits that
    do not involve W at all: stage 0 waits (p-1) t_b for the first B to come back, the last stage
    (p-1) t_f for the first F, so the idle time is at least (p-1) max(t_f, t_b), which is the
    formula when t_w >= min(t_f, t_b). Checked against
    `simulate_pipeline(p, m, "zb-h1", t_fwd=t_f, t_bwd=t_b, t_w=t_w)` (tests/test_parallel.py).
    With m < p the steady state never forms and the closed form does not apply (ValueError).
    """
    p = _int("stages", stages)
    m = _int("micro_batches", micro_batches)
    if m < p:
        raise ValueError(f"the ZB-H1 closed form needs micro_batches >= stages, got m={m} < p={p}")
    tf, tb = _pos("t_f", t_f), _pos("t_b", t_b)
    tw = _pos("t_w", t_w)
    return (p - 1) * (tf + tb - min(tw, tf, tb))


# ---------------------------------------------------------------- pipeline: simulator


@dataclass
class PipelineTimeline:
    """The simulated timeline of one pipelined training step.

    ops[d] lists device d's work in order as (kind, micro_batch, chunk, start, end), kind "F" or
    "B", and "W" (weight gradient) for the split-backward schedule "zb-h1"; chunk is the model
    chunk on that device (always 0 unless interleaved). Times are exact fractions of the unit of
    t_fwd/t_bwd. peak_in_flight[d] is the most micro-batch activations device d held at once (a
    chunk's activation counts 1/chunks): a micro-batch is held from the start of its forward to
    the end of its backward, or of its W when the backward is split (W still reads the stored
    inputs of the layers).
    t_w is the weight-gradient time of a split backward ("zb-h1"); for the other schedules a
    non-zero t_w is part of one unsplit backward op of t_bwd + t_w.
    """
    stages: int
    micro_batches: int
    schedule: str
    chunks: int
    t_fwd: Fraction
    t_bwd: Fraction
    ops: list = field(default_factory=list)
    t_w: Fraction = Fraction(0)

    @property
    def makespan(self) -> float:
        return float(self._makespan())

    def _makespan(self) -> Fraction:
        return max(op[4] for dev in self.ops for op in dev)

    @property
    def busy(self) -> list[float]:
        return [float(sum(op[4] - op[3] for op in dev)) for dev in self.ops]

    @property
    def idle_fraction(self) -> float:
        """Idle device-time / (devices x step time): the bubble with denominator "total"."""
        T = self._makespan()
        busy = sum(op[4] - op[3] for dev in self.ops for op in dev)
        return float(1 - busy / (len(self.ops) * T))

    @property
    def bubble_ratio(self) -> float:
        """Idle device-time / busy device-time: the bubble with denominator "ideal"."""
        T = self._makespan()
        busy = sum(op[4] - op[3] for dev in self.ops for op in dev)
        return float((len(self.ops) * T - busy) / busy)

    @property
    def peak_in_flight(self) -> list[float]:
        out = []
        split = any(op[0] == "W" for dev in self.ops for op in dev)
        for dev in self.ops:
            events = []  # (time, order, delta): frees sort before allocations at the same time
            for kind, _, _, start, end in dev:
                if kind == "F":
                    events.append((start, 1, +1))
                elif kind == ("W" if split else "B"):
                    events.append((end, 0, -1))
            level = peak = 0
            for _, _, delta in sorted(events):
                level += delta
                peak = max(peak, level)
            out.append(peak / self.chunks)
        return out

    def slot(self) -> Fraction:
        """The grid's time slot: the largest duration that divides every op's duration."""
        durs = {op[4] - op[3] for dev in self.ops for op in dev}
        g = Fraction(0)
        for d in durs:
            g = Fraction(math.gcd(g.numerator * d.denominator, d.numerator * g.denominator),
                         g.denominator * d.denominator)
        return g

    def grid(self) -> np.ndarray:
        """(stages, n_slots) array of labels: "F3" / "B3" / "W3" (micro-batch 3), "F3c1" for chunk 1
        when interleaved, and "" for an idle slot. One slot lasts `self.slot()` time units (a W of
        zero duration takes no slot)."""
        dt = self.slot()
        n = int(self._makespan() / dt)
        g = np.full((len(self.ops), n), "", dtype=object)
        for d, dev in enumerate(self.ops):
            for kind, mb, ch, start, end in dev:
                label = f"{kind}{mb}" + (f"c{ch}" if self.chunks > 1 else "")
                g[d, int(start / dt):int(end / dt)] = label
        return g


def _device_order(p: int, m: int, v: int, schedule: str, d: int) -> list[tuple[str, int, int]]:
    """The order in which device d runs its (kind, micro_batch, chunk) ops."""
    if schedule == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if schedule == "1f1b":
        w = min(p - d - 1, m)
        order = [("F", i, 0) for i in range(w)]
        for i in range(m - w):
            order += [("F", w + i, 0), ("B", i, 0)]
        return order + [("B", i, 0) for i in range(m - w, m)]
    if schedule == "zb-h1":
        # 1F1B's order of F and B; device d runs W(i) right after B(i + d) (W deferred by d
        # micro-batches), and the d W's still owed after the last B at the end. F's done minus
        # W's done never exceeds p: the same peak as 1F1B's first stage, on every stage.
        w = min(p - d - 1, m)
        order = [("F", i, 0) for i in range(w)]

        def b_then_w(i):
            return [("B", i, 0)] + ([("W", i - d, 0)] if i >= d else [])

        for i in range(m - w):
            order += [("F", w + i, 0)] + b_then_w(i)
        for i in range(m - w, m):
            order += b_then_w(i)
        return order + [("W", i, 0) for i in range(max(m - d, 0), m)]
    # interleaved (Megatron-LM's forward_backward_pipelining_with_interleaving)
    total = m * v

    def fwd(k):
        return ("F", (k // (p * v)) * p + k % p, (k // p) % v)

    def bwd(k):
        return ("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)

    w = total if m == p else min(2 * (p - d - 1) + (v - 1) * p, total)
    order = [fwd(k) for k in range(w)]
    for i in range(total - w):
        order += [fwd(w + i), bwd(i)]
    return order + [bwd(k) for k in range(total - w, total)]


def simulate_pipeline(stages, micro_batches, schedule="gpipe", chunks=1, t_fwd=1, t_bwd=2,
                      t_w=None) -> PipelineTimeline:
    """Build the timeline of one training step of a p-stage pipeline under `schedule`.

    Each device runs its ops in the schedule's order, each as early as its dependencies allow:
    the forward of micro-batch i on (virtual) stage k waits for its forward on stage k-1; the
    backward waits for the backward on stage k+1 (the last stage: for its own forward).
    Communication is free. t_fwd/t_bwd are the times of one micro-batch on one whole stage; an
    interleaved device holds `chunks` = v model chunks of 1/v of the stage each (virtual stage
    c p + d on device d), so each chunk op takes t/v.
    Schedules: "gpipe" (all forwards, then all backwards; Huang et al. 2019); "1f1b"
    (PipeDream-Flush: p-d-1 warm-up forwards, then alternate, then drain; the 1F1B order of
    PipeDream, Narayanan et al. 2019, flushed every step as in PipeDream-2BW, Narayanan et al.
    2021); "interleaved" (Narayanan et al. 2021, Megatron-LM's order); "zb-h1" (Qi et al. 2024,
    "Zero Bubble Pipeline Parallelism", the memory-efficient handcrafted schedule ZB-H1).

    Split backward ("zb-h1"): t_bwd is then the time of B, the gradient w.r.t. the stage's input,
    and `t_w` (required, >= 0) the time of W, the gradient w.r.t. its weights. B of micro-batch i
    on stage s waits for B on stage s+1 only (nothing waits for a W); W(i) waits for B(i) on the
    same device. The order is 1F1B's for F and B, with device d running W(i) after B(i + d) and
    its last d W's at the end, so every device holds at most p micro-batches (F started, W not
    done), the peak of 1F1B's first stage. Its idle time per device is
    `pipeline_bubble_zb_h1`: (p-1)(t_f + t_b - t_w) for m >= p and t_w <= min(t_f, t_b).
    For the other schedules `t_w` (default None: 0) is added to one unsplit backward op,
    t_bwd + t_w, so `simulate_pipeline(p, m, "1f1b", 1, t_b, t_w)` is the 1F1B baseline of
    `simulate_pipeline(p, m, "zb-h1", 1, t_b, t_w)`.
    """
    if schedule == "zb-h1":
        p, m, v = _schedule(stages, micro_batches, "1f1b", chunks)
        if t_w is None:
            raise ValueError("schedule 'zb-h1' splits the backward: give t_w, the weight-gradient time "
                             "(t_bwd is then the input-gradient time alone)")
    else:
        p, m, v = _schedule(stages, micro_batches, schedule, chunks)
    if t_w is None:
        t_w = 0
    if isinstance(t_w, bool) or not isinstance(t_w, (int, float, Fraction, np.integer, np.floating)) \
            or not math.isfinite(t_w) or t_w < 0:
        raise ValueError(f"t_w must be a finite number >= 0, got {t_w!r}")
    tf = Fraction(_pos("t_fwd", t_fwd)).limit_denominator(10**9) / v
    tb = Fraction(_pos("t_bwd", t_bwd)).limit_denominator(10**9) / v
    tw = Fraction(t_w).limit_denominator(10**9) / v
    split = schedule == "zb-h1"
    dur = {"F": tf, "B": tb if split else tb + tw, "W": tw}
    V = p * v
    orders = [_device_order(p, m, v, schedule, d) for d in range(p)]
    done: dict[tuple[str, int, int], Fraction] = {}  # (kind, mb, virtual stage) -> end time
    ops: list[list] = [[] for _ in range(p)]
    nxt = [0] * p
    free = [Fraction(0)] * p
    left = sum(len(o) for o in orders)
    while left:
        progress = False
        for d in range(p):
            while nxt[d] < len(orders[d]):
                kind, mb, ch = orders[d][nxt[d]]
                vs = ch * p + d
                if kind == "F":
                    dep = ("F", mb, vs - 1) if vs > 0 else None
                elif kind == "B":
                    dep = ("B", mb, vs + 1) if vs < V - 1 else ("F", mb, vs)
                else:  # W: its own stage's B (the weights' input gradient is ready)
                    dep = ("B", mb, vs)
                if dep is not None and dep not in done:
                    break
                start = max(free[d], done[dep] if dep is not None else Fraction(0))
                end = start + dur[kind]
                done[(kind, mb, vs)] = end
                ops[d].append((kind, mb, ch, start, end))
                free[d] = end
                nxt[d] += 1
                left -= 1
                progress = True
        if not progress:  # pragma: no cover - a wrong op order, never a user error
            raise RuntimeError(f"pipeline schedule {schedule!r} deadlocked (p={p}, m={m}, v={v})")
    return PipelineTimeline(p, m, schedule, v, tf * v, tb * v, ops, tw * v)


def plot_pipeline(timeline: PipelineTimeline, ax=None, title: str | None = None, xmax: float | None = None):
    """Gantt chart of a simulated step: one row per device, forwards light, backwards dark, the
    micro-batch number in each box (hatched: the second and later model chunks of an interleaved
    schedule; dotted: the weight-gradient W of a split backward), idle time blank. `xmax` fixes
    the time axis, to compare several charts."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.5 * timeline.stages + 1.2))
    cmap = plt.get_cmap("tab10")
    for d, dev in enumerate(timeline.ops):
        for kind, mb, ch, start, end in dev:
            if end == start:  # a W of zero duration
                continue
            ax.barh(d, float(end - start), left=float(start), height=0.8, color=cmap(mb % 10),
                    alpha={"F": 0.4, "B": 0.95, "W": 0.7}[kind], edgecolor="black", linewidth=0.5,
                    hatch="//" if ch % 2 else ("..." if kind == "W" else None))
            ax.text(float(start + end) / 2, d, str(mb), ha="center", va="center",
                    fontsize=7 if timeline.chunks == 1 else 6)
    ax.set_yticks(range(timeline.stages))
    ax.set_yticklabels([f"device {d}" for d in range(timeline.stages)])
    ax.set_ylim(timeline.stages - 0.5, -0.5)
    ax.set_xlabel("time (units of one forward of one micro-batch on one stage)")
    ax.set_xlim(0, xmax if xmax is not None else timeline.makespan)
    name = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": f"interleaved 1F1B, v={timeline.chunks}",
            "zb-h1": "ZB-H1"}[timeline.schedule]
    ax.set_title(title or f"{name}: p={timeline.stages}, m={timeline.micro_batches}, "
                          f"idle fraction {timeline.idle_fraction:.3f}")
    return ax


# ---------------------------------------------------------------- tensor parallelism: shards


def column_parallel_shard(in_dim, out_dim, tp) -> tuple[int, int]:
    """Per-rank weight shape of a column-parallel linear layer: (in_dim, out_dim / tp).

    Column parallelism splits W (in_dim x out_dim, y = x W) along its output columns; every rank
    sees the whole input and computes out_dim/tp output features (Megatron-LM, Shoeybi et al. 2019).
    Example (TSX-07): 4096 x 16384 over tp = 4 gives (4096, 4096).
    """
    i, o, t = _int("in_dim", in_dim), _int("out_dim", out_dim), _int("tp", tp)
    if o % t:
        raise ValueError(f"tp={t} must divide out_dim={o} to split the columns evenly")
    return (i, o // t)


def row_parallel_shard(in_dim, out_dim, tp) -> tuple[int, int]:
    """Per-rank weight shape of a row-parallel linear layer: (in_dim / tp, out_dim).

    Row parallelism splits W along its input rows; each rank multiplies its slice of the input
    features and the partial outputs are summed (one all-reduce)."""
    i, o, t = _int("in_dim", in_dim), _int("out_dim", out_dim), _int("tp", tp)
    if i % t:
        raise ValueError(f"tp={t} must divide in_dim={i} to split the rows evenly")
    return (i // t, o)


def _rank(rank, tp):
    t = _int("tp", tp)
    r = _int("rank", rank, 0)
    if r >= t:
        raise ValueError(f"rank must be in 0..{t - 1}, got {r}")
    return r, t


def shard_columns(weight: torch.Tensor, rank, tp) -> torch.Tensor:
    """Rank `rank`'s block of columns of `weight` (last dim split in tp equal parts); a 1-D bias is
    split the same way. Returns a contiguous copy."""
    r, t = _rank(rank, tp)
    n = weight.shape[-1]
    if n % t:
        raise ValueError(f"tp={t} must divide the last dimension {n}")
    w = n // t
    return weight[..., r * w:(r + 1) * w].clone().contiguous()


def shard_rows(weight: torch.Tensor, rank, tp) -> torch.Tensor:
    """Rank `rank`'s block of rows of a 2-D `weight` (first dim split in tp equal parts)."""
    r, t = _rank(rank, tp)
    if weight.dim() != 2:
        raise ValueError(f"shard_rows expects a 2-D weight, got shape {tuple(weight.shape)}")
    n = weight.shape[0]
    if n % t:
        raise ValueError(f"tp={t} must divide the first dimension {n}")
    w = n // t
    return weight[r * w:(r + 1) * w].clone().contiguous()


def heads_per_rank(heads, tp) -> int:
    """Attention heads each tensor-parallel rank computes: heads / tp (Megatron splits Q, K, V
    column-wise by whole heads, so tp must divide the number of heads)."""
    h, t = _int("heads", heads), _int("tp", tp)
    if h % t:
        raise ValueError(f"tp={t} must divide heads={h}: a head cannot be split across ranks")
    return h // t


# ---------------------------------------------------------------- communication volume


def tp_comm_bytes_per_layer(batch, seq_len, hidden, tp, bytes_per_element=2, measure="payload",
                            backward=True) -> float:
    """Tensor-parallel bytes of one transformer layer (Megatron-LM, no sequence parallelism).

    Forward: 2 all-reduces (after the attention output projection and after the MLP's second
    matmul), each of `batch*seq_len*hidden` activations. Backward: 2 more (the input gradients of
    the attention block and of the MLP, Megatron's operator f). measure="payload": sum of
    buffer sizes S = 4 b s h e (2 b s h e forward only); measure="wire": bytes one rank sends
    with ring all-reduces, 2 (t-1)/t of that. tp = 1 needs no communication (0 bytes).
    Sequence parallelism swaps each all-reduce for a reduce-scatter + all-gather of the same volume.
    """
    b, s, h, t = (_int("batch", batch), _int("seq_len", seq_len), _int("hidden", hidden), _int("tp", tp))
    e = _pos("bytes_per_element", bytes_per_element)
    _measure(measure)
    if t == 1:
        return 0.0
    n_allreduce = 4 if backward else 2
    payload = n_allreduce * b * s * h * e
    return float(payload if measure == "payload" else payload * _ring_factor(t))


def dp_comm_bytes_per_step(n_params, world_size, bytes_per_element=2, measure="payload") -> float:
    """Data-parallel bytes of one optimizer step: one all-reduce of every gradient.

    measure="payload": S = n_params * bytes_per_element (2 for bf16 gradients, 4 for fp32);
    measure="wire": bytes one rank sends with a ring all-reduce, 2 (N-1)/N * S. The volume does
    not depend on the batch size; world_size = 1 needs no communication (0 bytes).
    """
    n, w = _int("n_params", n_params), _int("world_size", world_size)
    e = _pos("bytes_per_element", bytes_per_element)
    _measure(measure)
    if w == 1:
        return 0.0
    payload = n * e
    return float(payload if measure == "payload" else payload * _ring_factor(w))


def transformer_layer_params(hidden, biases=False) -> int:
    """Parameters of one transformer layer with a 4h MLP: 12 h^2 (Q, K, V, output projection
    4 h^2; MLP 8 h^2), plus 13 h for biases and the two LayerNorms when `biases`."""
    h = _int("hidden", hidden)
    return 12 * h * h + (13 * h if biases else 0)


def tp_dp_breakeven_tokens(hidden, n_params=None, activation_bytes=2, grad_bytes=2) -> float:
    """Tokens b*s per step at which one layer's TP traffic (4 b s h, fwd + bwd) equals its DP
    gradient traffic (n_params; default 12 h^2): b s = n_params * grad_bytes / (4 h activation_bytes),
    3h for bf16 everywhere. Above it DP moves fewer bytes, below it TP does (same group size for
    both, so the ring factor cancels)."""
    h = _int("hidden", hidden)
    n = transformer_layer_params(h) if n_params is None else _int("n_params", n_params)
    return n * _pos("grad_bytes", grad_bytes) / (4 * h * _pos("activation_bytes", activation_bytes))


# ---------------------------------------------------------------- when communication wins (EXT-COMMBOUND)
#
# Per transformer layer (12 h^2 parameters, 6 * 12 h^2 = 72 h^2 FLOPs per token for forward +
# backward, `compute.training_flops`), communication priced with the alpha-beta ring models of
# `comms`, compute at `peak_flops` per device. A strategy is communication-bound when its
# communication takes longer than the compute that could hide it (perfect overlap assumed: the
# step then lasts max(comm, compute)). Each *_times function returns (comm_s, compute_s); each
# *_crossover gives the knob at which the two are equal.


def dp_comm_compute_times(tokens_per_device, hidden, world_size, alpha, bandwidth, peak_flops,
                          bytes_per_element=2, fsdp=False) -> tuple[float, float]:
    """One layer, one optimizer step of data parallelism over `world_size` ranks.

    comm: DDP a ring all-reduce of the layer's 12 h^2 gradients (e bytes each):
    2(n-1) alpha + 2 (n-1)/n 12 h^2 e / B; FSDP (fsdp=True) all-gathers the weights in forward
    and in backward and reduce-scatters the gradients: 3 (n-1) alpha + 3 (n-1)/n 12 h^2 e / B.
    compute: 72 h^2 T / peak_flops for T = `tokens_per_device` (the per-device batch in tokens).
    """
    T, h, n = _int("tokens_per_device", tokens_per_device), _int("hidden", hidden), _int("world_size", world_size)
    e = _pos("bytes_per_element", bytes_per_element)
    S = transformer_layer_params(h) * e
    if fsdp:
        comm = 2 * _comms.all_gather_time(n, S, alpha, bandwidth) + _comms.reduce_scatter_time(n, S, alpha, bandwidth)
    else:
        comm = _comms.ring_allreduce_time(n, S, alpha, bandwidth)
    return float(comm), _compute.training_flops(transformer_layer_params(h), T) / _pos("peak_flops", peak_flops)


def dp_crossover_tokens(hidden, world_size, alpha, bandwidth, peak_flops, bytes_per_element=2, fsdp=False) -> float:
    """Per-device tokens T* at which DP's (or FSDP's) communication equals the layer's compute:
    T* = peak_flops * comm / (72 h^2), comm independent of T. Below T* the run is
    communication-bound. Bandwidth part alone (alpha = 0, large n): T* ~ peak_flops e / (3 B) for
    DDP, 1.5 times that for FSDP: a property of the hardware, not of the model size."""
    comm, _ = dp_comm_compute_times(1, hidden, world_size, alpha, bandwidth, peak_flops, bytes_per_element, fsdp)
    return comm * _pos("peak_flops", peak_flops) / (6.0 * transformer_layer_params(_int("hidden", hidden)))


def tp_comm_compute_times(tokens, hidden, tp, alpha, bandwidth, peak_flops, bytes_per_element=2) -> tuple[float, float]:
    """One layer of Megatron tensor parallelism over `tp` ranks, forward + backward of `tokens`
    (b s) tokens: comm = 4 ring all-reduces of T h e bytes, 4 [2(t-1) alpha + 2 (t-1)/t T h e / B];
    compute = 72 h^2 T / (t peak_flops) (each rank does 1/t of the matmuls). tp = 1: no comm."""
    T, h, t = _int("tokens", tokens), _int("hidden", hidden), _int("tp", tp)
    e = _pos("bytes_per_element", bytes_per_element)
    comm = 0.0 if t == 1 else 4 * _comms.ring_allreduce_time(t, T * h * e, alpha, bandwidth)
    return float(comm), _compute.training_flops(transformer_layer_params(h), T) / (t * _pos("peak_flops", peak_flops))


def tp_crossover_hidden(tokens, tp, alpha, bandwidth, peak_flops, bytes_per_element=2) -> float:
    """Width h* at which TP's communication equals its compute (compute grows as h^2, comm as h):
    the positive root of a h^2 = b h + c with a = 72 T / (t F), b = 8 (t-1) T e / (t B),
    c = 8 (t-1) alpha. Narrower layers are communication-bound. Bandwidth part alone:
    h* = (t-1) e F / (9 B)."""
    T, t = _int("tokens", tokens), _int("tp", tp)
    if t < 2:
        raise ValueError("tp must be >= 2 for a crossover: tp = 1 does not communicate")
    e, F = _pos("bytes_per_element", bytes_per_element), _pos("peak_flops", peak_flops)
    _, alpha, B = _comms._link(0.0, alpha, bandwidth)
    a = 72.0 * T / (t * F)
    b = 8.0 * (t - 1) * T * e / (t * B)
    c = 8.0 * (t - 1) * alpha
    return (b + math.sqrt(b * b + 4 * a * c)) / (2 * a)


def pp_comm_compute_times(micro_batch_tokens, hidden, layers_per_stage, alpha, bandwidth, peak_flops,
                          bytes_per_element=2) -> tuple[float, float]:
    """One micro-batch on one pipeline stage of `layers_per_stage` layers: comm = the activation
    sent forward and its gradient sent back across one stage boundary, 2 (alpha + T h e / B)
    (point to point); compute = 72 h^2 T l / peak_flops."""
    T, h, l = _int("micro_batch_tokens", micro_batch_tokens), _int("hidden", hidden), _int("layers_per_stage", layers_per_stage)
    e = _pos("bytes_per_element", bytes_per_element)
    comm = 2 * _comms.alpha_beta_time(T * h * e, alpha, bandwidth)
    return float(comm), l * _compute.training_flops(transformer_layer_params(h), T) / _pos("peak_flops", peak_flops)


def pp_crossover_tokens(hidden, layers_per_stage, alpha, bandwidth, peak_flops, bytes_per_element=2) -> float:
    """Micro-batch size T* (tokens) above which a stage's compute hides its point-to-point
    traffic: 72 h^2 l T / F = 2 alpha + 2 T h e / B, so T* = 2 alpha / (72 h^2 l / F - 2 h e / B);
    smaller micro-batches are latency-bound. math.inf when the bandwidth term alone already
    exceeds the compute (h l <= e F / (36 B)): no micro-batch size hides it."""
    h, l = _int("hidden", hidden), _int("layers_per_stage", layers_per_stage)
    e, F = _pos("bytes_per_element", bytes_per_element), _pos("peak_flops", peak_flops)
    _, alpha, B = _comms._link(0.0, alpha, bandwidth)
    slope = 72.0 * h * h * l / F - 2.0 * h * e / B
    return math.inf if slope <= 0 else 2.0 * alpha / slope


def cp_comm_compute_times(chunk_tokens, hidden, alpha, bandwidth, peak_flops, bytes_per_element=2,
                          causal=False) -> tuple[float, float]:
    """One ring-attention step of context parallelism, forward, one layer (all heads): a rank
    holding c = `chunk_tokens` query tokens attends to one K/V chunk of c tokens while it passes
    that chunk on to the next rank. comm = alpha + 2 c h e / B (K and V, point to point);
    compute = 4 c^2 h / peak_flops (Q K^T and P V, 2 c^2 h FLOPs each). causal=True: the
    load-balanced (zig-zag) layout, in which every step computes half a block on average,
    2 c^2 h FLOPs. Liu, Zaharia and Abbeel, "Ring Attention with Blockwise Transformers" (2023)."""
    c, h = _int("chunk_tokens", chunk_tokens), _int("hidden", hidden)
    e, F = _pos("bytes_per_element", bytes_per_element), _pos("peak_flops", peak_flops)
    comm = _comms.alpha_beta_time(2 * c * h * e, alpha, bandwidth)
    return float(comm), (2.0 if causal else 4.0) * c * c * h / F


def cp_crossover_tokens(hidden, alpha, bandwidth, peak_flops, bytes_per_element=2, causal=False) -> float:
    """Chunk length c* (tokens per rank) above which one block's attention hides the K/V hop:
    k c^2 h / F = alpha + 2 c h e / B with k = 4 (k = 2 causal, zig-zag), so
    c* = (b + sqrt(b^2 + 4 a alpha)) / (2 a), a = k h / F, b = 2 h e / B. Bandwidth part alone
    (alpha = 0): c* = 2 e F / (k B) = e F / (2 B), independent of the width: the ring-attention
    condition that the block size exceed the FLOPs-to-bandwidth ratio."""
    h = _int("hidden", hidden)
    e, F = _pos("bytes_per_element", bytes_per_element), _pos("peak_flops", peak_flops)
    _, alpha, B = _comms._link(0.0, alpha, bandwidth)
    a = (2.0 if causal else 4.0) * h / F
    b = 2.0 * h * e / B
    return (b + math.sqrt(b * b + 4 * a * alpha)) / (2 * a)


# ---------------------------------------------------------------- sharded state per rank

SHARDING_STRATEGIES = ("NO_SHARD", "ZERO1", "SHARD_GRAD_OP", "FULL_SHARD", "HYBRID_SHARD")


def sharding_bytes_per_rank(n_params, world_size, strategy, shard_group=None, weight_bytes=2, grad_bytes=2,
                            optimizer_bytes=12) -> float:
    """Persistent training-state bytes per rank (weights + gradients + optimizer state, no
    activations and no transient gathered parameters) under a sharding strategy.

    Defaults: mixed-precision Adam, 2 + 2 + 12 = 16 bytes per parameter (bf16 weight and
    gradient; fp32 master weight, m and v) as in the ZeRO paper (Rajbhandari et al. 2020).
    NO_SHARD (DDP, ZeRO-0): P (w + g + o).  ZERO1: P (w + g + o/N).
    SHARD_GRAD_OP (ZeRO-2): P (w + (g + o)/N).  FULL_SHARD (ZeRO-3): P (w + g + o)/N.
    HYBRID_SHARD: FULL_SHARD inside groups of `shard_group` ranks (e.g. one node), replicated
    across groups: P (w + g + o)/shard_group. Names are torch FSDP's ShardingStrategy.
    """
    n, w = _int("n_params", n_params), _int("world_size", world_size)
    wb = _pos("weight_bytes", weight_bytes)
    gb = _pos("grad_bytes", grad_bytes)
    ob = float(optimizer_bytes)
    if not math.isfinite(ob) or ob < 0:
        raise ValueError(f"optimizer_bytes must be >= 0, got {optimizer_bytes!r}")
    s = str(strategy).upper()
    if s not in SHARDING_STRATEGIES:
        raise ValueError(f"strategy must be one of {SHARDING_STRATEGIES}, got {strategy!r}")
    if s == "HYBRID_SHARD":
        if shard_group is None:
            raise ValueError("HYBRID_SHARD needs shard_group, the number of ranks one copy is sharded over")
        g = _int("shard_group", shard_group)
        if w % g:
            raise ValueError(f"shard_group={g} must divide world_size={w}")
        return n * (wb + gb + ob) / g
    if shard_group is not None:
        raise ValueError(f"shard_group only applies to HYBRID_SHARD, not {s}")
    return {"NO_SHARD": n * (wb + gb + ob), "ZERO1": n * (wb + gb + ob / w),
            "SHARD_GRAD_OP": n * (wb + (gb + ob) / w), "FULL_SHARD": n * (wb + gb + ob) / w}[s]


# ---------------------------------------------------------------- the column-then-row-parallel MLP


class _CopyToTP(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce (sum) of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all-reduce (sum) forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        out = x.contiguous().clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def copy_to_tensor_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    """f: pass x on unchanged; in the backward, sum the input gradients of all TP ranks."""
    return _CopyToTP.apply(x, group)


def reduce_from_tensor_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    """g: sum the partial outputs of all TP ranks; the backward passes the gradient on unchanged."""
    return _ReduceFromTP.apply(x, group)


def mlp_reference(x, W1, b1, W2, b2) -> torch.Tensor:
    """The unsharded MLP: GELU(x W1 + b1) W2 + b2 (exact, erf-based GELU)."""
    return F.gelu(x @ W1 + b1) @ W2 + b2


def split_mlp_weights(W1, b1, W2, rank, tp):
    """Rank `rank`'s shards: columns of W1 (h x 4h) and b1, rows of W2 (4h x h)."""
    if W1.shape[1] != W2.shape[0] or b1.shape[-1] != W1.shape[1]:
        raise ValueError(f"inconsistent MLP shapes: W1 {tuple(W1.shape)}, b1 {tuple(b1.shape)}, W2 {tuple(W2.shape)}")
    return shard_columns(W1, rank, tp), shard_columns(b1, rank, tp), shard_rows(W2, rank, tp)


class ColumnRowParallelMLP(torch.nn.Module):
    """Tensor-parallel MLP of Megatron-LM: W1 column-parallel, W2 row-parallel.

    Rank r holds columns r of W1 and b1 and the matching rows of W2. The forward
    y = g(GELU(f(x) W1_r + b1_r) W2_r) + b2 needs exactly one all-reduce (in g): the columns of
    x W1 that rank r owns are complete, so GELU (elementwise) is applied locally, and the row
    shards' products are partial sums of y. b2 is added once, after the reduce (adding it before
    would sum it tp times); every rank then holds the same y and the same gradient of b2.
    The backward needs exactly one all-reduce too (in f): each rank's input gradient covers only
    its columns of W1, and the true gradient of x is their sum.
    """

    def __init__(self, W1, b1, W2, b2, rank=None, world_size=None, group=None):
        super().__init__()
        rank = dist.get_rank(group) if rank is None else rank
        world_size = dist.get_world_size(group) if world_size is None else world_size
        W1s, b1s, W2s = split_mlp_weights(W1, b1, W2, rank, world_size)
        self.W1 = torch.nn.Parameter(W1s)
        self.b1 = torch.nn.Parameter(b1s)
        self.W2 = torch.nn.Parameter(W2s)
        self.b2 = torch.nn.Parameter(b2.detach().clone())
        self.group = group

    def forward(self, x):
        x = copy_to_tensor_parallel(x, self.group)
        partial = F.gelu(x @ self.W1 + self.b1) @ self.W2
        return reduce_from_tensor_parallel(partial, self.group) + self.b2


def _tp_mlp_rank(rank, world_size, x, W1, b1, W2, b2, grad_output):
    from solutions_lib.dist import CommCounter

    dev = torch.device("cuda", rank) if dist.get_backend() == "nccl" else torch.device("cpu")
    mlp = ColumnRowParallelMLP(W1.to(dev), b1.to(dev), W2.to(dev), b2.to(dev), rank, world_size)
    x = x.to(dev).clone().requires_grad_(True)
    with CommCounter() as fwd:
        y = mlp(x)
    with CommCounter() as bwd:
        y.backward(grad_output.to(dev))
    # numpy, not tensors: a tensor sent back through the launcher's pipe travels as a shared-memory
    # file descriptor that dies with the rank's process
    cpu = lambda t: t.detach().cpu().numpy()  # noqa: E731
    return {"y": cpu(y), "grad_x": cpu(x.grad), "grad_W1": cpu(mlp.W1.grad), "grad_b1": cpu(mlp.b1.grad),
            "grad_W2": cpu(mlp.W2.grad), "grad_b2": cpu(mlp.b2.grad),
            "forward_comm": fwd.summary(), "backward_comm": bwd.summary()}


def run_tp_mlp(x, W1, b1, W2, b2, world_size=2, grad_output=None, backend=None) -> dict:
    """Run ColumnRowParallelMLP on `world_size` ranks (gloo on CPU unless enough GPUs) with
    solutions_lib.dist.launch, one forward and one backward of sum(y * grad_output) (default
    grad_output: ones). Returns {"outputs": [y per rank], "grads": {"x", "W1", "b1", "W2", "b2"}
    (shards put back together in full shape), "forward_comm"/"backward_comm": [per-rank
    CommCounter summaries {op: (calls, bytes)}]}."""
    from solutions_lib.dist import launch

    if grad_output is None:
        grad_output = torch.ones(*x.shape[:-1], W2.shape[1], dtype=x.dtype)
    res = launch(_tp_mlp_rank, world_size, args=(x, W1, b1, W2, b2, grad_output), backend=backend)
    res = [{k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in r.items()} for r in res]
    return {
        "outputs": [r["y"] for r in res],
        "grads": {"x": res[0]["grad_x"], "W1": torch.cat([r["grad_W1"] for r in res], dim=1),
                  "b1": torch.cat([r["grad_b1"] for r in res], dim=-1),
                  "W2": torch.cat([r["grad_W2"] for r in res], dim=0), "b2": res[0]["grad_b2"]},
        "grad_x_per_rank": [r["grad_x"] for r in res],
        "forward_comm": [r["forward_comm"] for r in res],
        "backward_comm": [r["backward_comm"] for r in res],
    }


# ---------------------------------------------------------------- combining the axes (11 theory)
#
# A cost model that says which parallel layout to use: per-layer traffic of each axis, memory per
# rank of a (dp, tp, pp, cp) layout, the step time of a (dp, tp, pp) layout from alpha-beta
# links, and a planner that enumerates the layouts. Conventions (shared with the notebook
# source/11_model_parallel/theory.ipynb and solutions_lib.upstream's copies):
#
# model:   {"layers": L, "hidden": h, "heads": a, "seq_len": s, "global_batch": B (sequences
#           per optimizer step), "micro_batch": b (sequences per micro-batch)}
# cluster: {"n_gpus": N (a multiple of gpus_per_node, or one node), "gpus_per_node": G,
#           "flops": F (sustained FLOP/s per GPU), "memory": bytes per GPU,
#           "intra": (alpha, bandwidth) inside a node, "inter": (alpha, bandwidth) between nodes}
# layout:  {"dp": d, "tp": t, "pp": p, "cp": c, "zero": z, "sp": bool}
#
# Parameters: 12 h^2 per layer (embeddings and the head are left out); mixed-precision Adam,
# 2 + 2 + 12 = 16 bytes per parameter; activations and gradients travel in 16 bits (e = 2).
# Rank order: tp fastest, then cp, then dp, then pp (Megatron-LM's default), rank r in node r // G.

LAYOUT_KEYS = ("dp", "tp", "pp", "cp", "zero", "sp")
COMM_AXES = ("tp", "sp", "pp", "cp")
_TIME_KEYS = ("compute", "tp", "pp", "bubble", "dp", "total")


def make_layout(dp, tp, pp, cp=1, zero=1, sp=True) -> dict:
    """A layout dict with every key: {"dp", "tp", "pp", "cp", "zero", "sp"} (ints and a bool)."""
    return {"dp": int(dp), "tp": int(tp), "pp": int(pp), "cp": int(cp), "zero": int(zero), "sp": bool(sp)}


def layer_comm_bytes(axis, batch, seq_len, hidden, degree, bytes_per_element=2, kv_hidden=None) -> float:
    """Bytes one rank sends for one transformer layer and one micro-batch (b sequences of s
    tokens), forward + backward, when the layer is split `degree` ways along `axis`; ring
    collectives, so a collective over n ranks of an S-byte buffer sends (n-1)/n S per
    reduce-scatter or all-gather and 2 (n-1)/n S per all-reduce. degree = 1: 0 bytes.

    "tp" (Megatron, Shoeybi et al. 2019): 4 all-reduces of b s h e (2 forward, 2 backward):
        8 (t-1)/t b s h e.
    "sp" (Korthikanti et al. 2022), the memory-optimal form that `layout_memory_per_rank`'s
        34/t activations assume: each all-reduce becomes a reduce-scatter + all-gather of the same
        buffer (4 of each), and because each column-parallel matmul keeps only the sequence shard
        of its input for the backward, it all-gathers that input once more there (2 more per
        layer): 6 all-gathers + 4 reduce-scatters, 10 (t-1)/t b s h e, 25% more bytes than TP
        (the course's `dist.tensor_parallel` block, `tp_comm_calls_per_step`; Megatron-LM
        overlaps the extra all-gathers with the data-gradient matmuls, so `layout_step_time`
        charges SP the exposed time of TP). The 4 + 4 form (8 (t-1)/t, exercises 1's block) saves
        the gathered inputs whole: s b h (4 + 30/t) activations, not 34/t.
    "pp" (Narayanan et al. 2021): an interior stage sends the activation b s h e forward and the
        gradient b s h e backward at each micro-batch: 2 b s h e (charged to the boundary layer).
    "cp" (ring attention, Liu et al. 2023): chunk = b (s/c) h_kv e of K (and one of V); forward
        c-1 hops of K and V, backward c-1 hops of K, V, dK, dV and one last hop of dK, dV:
        (6 (c-1) + 2) chunks = (6c - 4)/c b s h_kv e (`dist.context_parallel.ring_attention_bytes`).
        h_kv = `kv_hidden` (fewer K/V heads with GQA), default h.
    """
    if axis not in COMM_AXES:
        raise ValueError(f"axis must be one of {COMM_AXES}, got {axis!r}")
    b, s, h, n = _int("batch", batch), _int("seq_len", seq_len), _int("hidden", hidden), _int("degree", degree)
    e = _pos("bytes_per_element", bytes_per_element)
    hk = h if kv_hidden is None else _int("kv_hidden", kv_hidden)
    if n == 1:
        return 0.0
    if axis == "tp":
        return 8 * (n - 1) / n * b * s * h * e
    if axis == "sp":
        return 10 * (n - 1) / n * b * s * h * e
    if axis == "pp":
        return 2.0 * b * s * h * e
    if s % n:
        raise ValueError(f"context parallelism over {n} ranks needs seq_len divisible by {n}, got {s}")
    return (6 * (n - 1) + 2) * b * (s // n) * hk * e


def _model(model):
    try:
        L, h, a, s, B, b = (model[k] for k in ("layers", "hidden", "heads", "seq_len", "global_batch", "micro_batch"))
    except (KeyError, TypeError):
        raise ValueError("model must be a dict with layers, hidden, heads, seq_len, global_batch, micro_batch") from None
    return (_int("layers", L), _int("hidden", h), _int("heads", a), _int("seq_len", s),
            _int("global_batch", B), _int("micro_batch", b))


def _layout(layout, model):
    if not isinstance(layout, dict) or any(k not in layout for k in LAYOUT_KEYS):
        raise ValueError(f"layout must be a dict with the keys {LAYOUT_KEYS} (see make_layout), got {layout!r}")
    d, t, p, c = (_int(k, layout[k]) for k in ("dp", "tp", "pp", "cp"))
    z = layout["zero"]
    if isinstance(z, bool) or z not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {z!r}")
    if not isinstance(layout["sp"], bool):
        raise ValueError(f"sp must be True or False, got {layout['sp']!r}")
    L, h, a, s, B, b = _model(model)
    if L % p:
        raise ValueError(f"pp={p} must divide layers={L}")
    if a % t or h % t:
        raise ValueError(f"tp={t} must divide heads={a} (and hidden={h})")
    if s % c:
        raise ValueError(f"cp={c} must divide seq_len={s}")
    if B % (d * b):
        raise ValueError(f"global_batch={B} must be a multiple of dp x micro_batch = {d} x {b}")
    return d, t, p, c, int(z), layout["sp"]


def layout_memory_per_rank(layout, model, *, chunks=1, recompute="selective", grad_bytes=2, vocab=None) -> dict:
    """Bytes per GPU of a (dp, tp, pp, cp) layout: {"states", "activations", "total"}.

    states: the rank's P_r = 12 h^2 (L/p) / t parameters at 16 bytes (2 weight + 2 gradient + 12
        fp32 master/m/v), ZeRO stage z sharding over the d c ranks that hold the same weights
        (`memory.zero_bytes_per_rank`: z = 1 shards the 12, z = 2 the 14, z = 3 all 16 bytes).
    activations: per layer and micro-batch (s/c) b h (34/t) bytes with sequence parallelism, or
        (s/c) b h (10 + 24/t) without (Korthikanti et al. 2022, Table 2, selective recomputation:
        attention scores recomputed, 16-bit values, 1-byte dropout masks), times the L/p layers
        of a stage, times the micro-batches the first stage holds under 1F1B, min(p, m) with
        m = B / (d b) (`pipeline_peak_activations`). Context parallelism divides the sequence.
    Keyword options (`planner_terms`; the defaults give the numbers above): `chunks` (interleaved
    1F1B), `recompute`, `grad_bytes` (fp32 main gradients), `vocab` (embedding and LM head on the
    first and last stage: the larger stage is reported, with a "stage" key).
    """
    v, rc, g, V, _ = _pt.check_extras(chunks, recompute, grad_bytes, vocab)
    if (v, rc, g, V) != (1, "selective", 2, None):
        return _memory_extras(layout, model, v, rc, g, V)
    d, t, p, c, z, sp = _layout(layout, model)
    L, h, _, s, B, b = _model(model)
    P = 12.0 * h * h * (L // p) / t
    sharded = {0: 0.0, 1: 12.0, 2: 14.0, 3: 16.0}[z]
    states = P * (16.0 - sharded) + P * sharded / (d * c)
    per_layer = (s / c) * b * h * ((34.0 / t) if sp else (10.0 + 24.0 / t))
    m = B // (d * b)
    acts = (L // p) * min(p, m) * per_layer
    return {"states": states, "activations": acts, "total": states + acts}


def _memory_extras(layout, model, v, rc, g, V) -> dict:
    d, t, p, c, z, sp = _layout(layout, model)
    L, h, a, s, B, b = _model(model)
    l, m = L // p, B // (d * b)
    whole, sharded = _pt._state_bytes_per_param(z, g)
    per_layer = _pt._layer_activation_bytes(s / c, b, h, a, t, sp, rc)
    if p > 1 and v > 1:
        _check_interleaving(l, m, p, v)
        held = [pipeline_peak_activations(p, m, "interleaved", v, stage=k) for k in (0, p - 1)]
    else:
        held = [float(min(p, m)), float(min(1, m)) if p > 1 else float(min(p, m))]
    out = None
    for k, (stage, n_held) in enumerate(zip(("first", "last"), held)):
        P_r = 12.0 * h * h * l / t
        logits = 0.0
        if V is not None:
            P_r += (V * h / t) * ((p == 1) + 1 if k == 0 else 1)
            logits = 4.0 * (s / c) * b * V / t if (k == 1 or p == 1) else 0.0
        states = P_r * whole + P_r * sharded / (d * c)
        acts = l * n_held * per_layer + logits
        row = {"states": states, "activations": acts, "total": states + acts}
        if V is not None:
            row["stage"] = stage
        if out is None or row["total"] > out["total"]:
            out = row
        if p == 1:
            break
    return out


def _check_interleaving(l, m, p, v):
    if l % v:
        raise ValueError(f"chunks={v} must divide the {l} layers of a stage")
    if m % p:
        raise ValueError(f"the interleaved schedule needs micro-batches m={m} to be a multiple of pp={p}")


def _cluster(cluster):
    try:
        N, G, F, M, intra, inter = (cluster[k] for k in ("n_gpus", "gpus_per_node", "flops", "memory", "intra", "inter"))
    except (KeyError, TypeError):
        raise ValueError("cluster must be a dict with n_gpus, gpus_per_node, flops, memory, intra, inter") from None
    N, G = _int("n_gpus", N), _int("gpus_per_node", G)
    if N > G and N % G:
        raise ValueError(f"n_gpus={N} must fill whole nodes of gpus_per_node={G}")
    links = []
    for name, link in (("intra", intra), ("inter", inter)):
        try:
            alpha, bw = link
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be (alpha seconds, bandwidth bytes/s), got {link!r}") from None
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha < 0:
            raise ValueError(f"{name} alpha must be a finite number >= 0, got {alpha!r}")
        links.append((float(alpha), _pos(f"{name} bandwidth", bw)))
    return N, G, _pos("flops", F), _pos("memory", M), links[0], links[1]


def _ring_allreduce(n, nbytes, link) -> float:
    alpha, bw = link
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / bw


def _half_ring(n, nbytes, link) -> float:
    """A ring reduce-scatter or all-gather: (n-1) alpha + (n-1)/n S / bandwidth."""
    alpha, bw = link
    return (n - 1) * alpha + (n - 1) / n * nbytes / bw


def _dp_time(d, m, z, nbytes, link, reshard_after_forward=True) -> float:
    """Seconds of data-parallel traffic per step for ZeRO stage z, m micro-batches, `nbytes` of
    16-bit gradients (= 16-bit weights) per rank; see `layout_step_time`."""
    if d == 1:
        return 0.0
    half = _half_ring(d, nbytes, link)
    if z <= 1:
        return 2 * half                                   # one all-reduce after the flush
    if z == 2:
        return m * half + half                            # reduce-scatter per micro-batch + one all-gather
    return m * (half + half + (half if reshard_after_forward else 0.0))   # gather(s) + reduce-scatter per micro-batch


def layout_step_time(layout, model, cluster, reshard_after_forward=True, *, chunks=1, recompute="selective",
                     grad_bytes=2, vocab=None, order=_pt.DEFAULT_ORDER) -> dict:
    """Seconds of one optimizer step of a (dp, tp, pp) layout (cp > 1: see the keyword options):
    {"compute", "tp", "pp", "bubble", "dp", "total"}, total = the sum of the other five.

    With l = L/p layers per stage, m = B/(d b) micro-batches, T = b s tokens per micro-batch,
    e = 2 bytes and AR(n, S, link) = 2 (n-1) alpha + 2 (n-1)/n S / bandwidth (ring all-reduce):
      compute per micro-batch and stage  t_c  = 72 h^2 l T / (t F)          (6 x 12 h^2 FLOPs/token)
      tensor parallel                    t_tp = 4 l AR(t, T h e, intra)      (exposed; SP: same time,
                                                its 2 extra all-gathers overlap the dgrad matmuls)
      pipeline send/recv                 t_pp = 2 (alpha + T h e / bandwidth) if p > 1,
                                                inter-node unless the whole job is one node
      one slot                           t_c + t_tp + t_pp; the 1F1B step runs m + p - 1 slots
      data parallel                      with S = 12 h^2 l e / t and H(d, S) = (d-1) alpha + (d-1)/d S / bw
                                         (a ring reduce-scatter or all-gather), on the intra-node link
                                         iff G % (t d) == 0:
                                           ZeRO-0/1: 2 H = AR(d, S), once per step (gradients
                                             accumulate whole over the micro-batches);
                                           ZeRO-2: m H + H: the gradient is sharded, so every
                                             micro-batch's backward reduce-scatters it; the updated
                                             weights are all-gathered once per step;
                                           ZeRO-3: m (2 H + H) with `reshard_after_forward` (all-gather
                                             the weights for the forward, again for the backward,
                                             reduce-scatter the gradient), m (H + H) without (the
                                             gathered weights are kept from forward to backward,
                                             as Llama 3 does; `best_layout` then counts 2 P_r bytes more)
    so compute = m t_c, tp = m t_tp, pp = m t_pp, bubble = (p-1)(t_c + t_tp + t_pp) and
    total = (m + p - 1)(t_c + t_tp + t_pp) + t_dp. tp must divide G (a TP group stays in a node)
    and d t p must equal N. Nothing overlaps except what the pipeline overlaps: a pessimistic
    model (Narayanan et al. 2021 overlap some of it; sec. 4).
    Keyword options (`planner_terms`; the defaults give the numbers above): `chunks` v (slot
    t_c + t_tp + v t_pp + t_cp, bubble (p-1)/v slots), `recompute`, `grad_bytes`, `vocab` (the
    last stage's LM head paces every slot), `order` (the rank order sets each axis's link), and
    cp > 1 in the layout (s/c tokens per rank, exposed ring-attention time, key "cp").
    """
    v, rc, g, V, order = _pt.check_extras(chunks, recompute, grad_bytes, vocab, order)
    if (v, rc, g, V, order) != (1, "selective", 2, None, _pt.DEFAULT_ORDER) or (
            isinstance(layout, dict) and layout.get("cp", 1) != 1):
        return _step_time_extras(layout, model, cluster, reshard_after_forward, v, rc, g, V, order)
    d, t, p, c, z, sp = _layout(layout, model)
    L, h, _, s, B, b = _model(model)
    N, G, F, _, intra, inter = _cluster(cluster)
    if c != 1:
        raise ValueError(f"the step-time model covers cp = 1 only, got cp={c}")
    if d * t * p != N:
        raise ValueError(f"dp x tp x pp = {d * t * p} must equal n_gpus={N}")
    if G % t:
        raise ValueError(f"tp={t} must divide gpus_per_node={G}: a TP group stays inside one node")
    e = 2.0
    l, m, T = L // p, B // (d * b), b * s
    t_c = 72.0 * h * h * l * T / (t * F)
    t_tp = 4 * l * _ring_allreduce(t, T * h * e, intra) if t > 1 else 0.0
    pp_link = intra if N <= G else inter
    t_pp = 2 * (pp_link[0] + T * h * e / pp_link[1]) if p > 1 else 0.0
    if not isinstance(reshard_after_forward, bool):
        raise ValueError(f"reshard_after_forward must be True or False, got {reshard_after_forward!r}")
    dp_link = intra if G % (t * d) == 0 else inter
    t_dp = _dp_time(d, m, z, 12.0 * h * h * l * e / t, dp_link, reshard_after_forward)
    slot = t_c + t_tp + t_pp
    return {"compute": m * t_c, "tp": m * t_tp, "pp": m * t_pp, "bubble": (p - 1) * slot, "dp": t_dp,
            "total": (m + p - 1) * slot + t_dp}


def _step_time_extras(layout, model, cluster, reshard_after_forward, v, rc, g, V, order) -> dict:
    d, t, p, c, z, sp = _layout(layout, model)
    L, h, a, s, B, b = _model(model)
    N, G, F, _, intra, inter = _cluster(cluster)
    if d * t * p * c != N:
        raise ValueError(f"dp x tp x pp x cp = {d * t * p * c} must equal n_gpus={N}")
    if G % t:
        raise ValueError(f"tp={t} must divide gpus_per_node={G}")
    if not isinstance(reshard_after_forward, bool):
        raise ValueError(f"reshard_after_forward must be True or False, got {reshard_after_forward!r}")
    e = 2.0
    l, m, T = L // p, B // (d * b), b * s
    v = v if p > 1 else 1
    if v > 1:
        _check_interleaving(l, m, p, v)
    full = rc == "full"
    link = _pt._axis_links(order, {"tp": t, "cp": c, "dp": d, "pp": p}, N, G, intra, inter)
    t_c = 72.0 * h * h * l * T / (t * c * F) * (4.0 / 3.0 if full else 1.0)
    t_head = 6.0 * V * h * T / (t * c * F) if V is not None else 0.0
    t_tp = 4 * l * _ring_allreduce(t, T * h * e / c, link["tp"]) * (1.5 if full else 1.0) if t > 1 else 0.0
    t_pp = 2 * (link["pp"][0] + T * h * e / c / link["pp"][1]) if p > 1 else 0.0
    t_cp = l * _pt._cp_exposed_time(c, s, b, h, t, e, link["cp"], F, full, cp_comm_compute_times)
    n_par = 12.0 * h * h * l / t + (V * h / t * (2 if p == 1 else 1) if V is not None else 0.0)
    # the gradient group is the d c ranks that hold the same weights: inter-node if either axis is
    dp_link = link["cp"] if (c > 1 and link["cp"] == inter) else link["dp"]
    t_dp = _pt._dp_time(d * c, m, z, n_par * e, n_par * g, dp_link, reshard_after_forward)
    slot = t_c + t_head + t_tp + v * t_pp + t_cp
    out = {"compute": m * (t_c + t_head), "tp": m * t_tp, "pp": m * v * t_pp, "bubble": (p - 1) * slot / v,
           "dp": t_dp, "total": (m * v + p - 1) * slot / v + t_dp}
    if c > 1:
        out["cp"] = m * t_cp
    return out


def candidate_layouts(model, cluster, zero=1, sp=True, *, cp=(1,)) -> list[dict]:
    """Every layout the planner considers: t a divisor of gpus_per_node that divides heads and
    hidden, p a divisor of layers, d = N / (t p) whole, B a multiple of d b; cp = 1. Ordered by
    (tp, pp). `cp`: the context-parallel degrees to try (each must divide seq_len; d = N/(t p c);
    ordered by (cp, tp, pp)), default (1,)."""
    L, h, a, s, B, b = _model(model)
    N, G, *_ = _cluster(cluster)
    cps = tuple(cp)
    if not cps or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in cps):
        raise ValueError(f"cp must be a non-empty sequence of ints >= 1, got {cp!r}")
    out = []
    for c in sorted(set(cps)):
        if s % c:
            continue
        for t in range(1, G + 1):
            if G % t or a % t or h % t:
                continue
            for p in range(1, L + 1):
                if L % p or N % (t * p * c):
                    continue
                d = N // (t * p * c)
                if B % (d * b):
                    continue
                out.append(make_layout(d, t, p, c, zero, sp))
    return out


def best_layout(model, cluster, zero=1, sp=True, reshard_after_forward=True, *, chunks=1, recompute="selective",
                grad_bytes=2, vocab=None, order=_pt.DEFAULT_ORDER, cp=(1,)):
    """The fastest layout that fits: among `candidate_layouts`, those whose
    `layout_memory_per_rank` total (plus the stage's gathered 16-bit weights, 2 P_r bytes with
    P_r = 12 h^2 (L/p) / t, when zero = 3 keeps them from forward to backward,
    `reshard_after_forward=False`) is <= cluster["memory"], the one with the smallest
    `layout_step_time(..., reshard_after_forward=...)` total (exact ties: the smaller tp, then
    the smaller pp). None when no layout fits. Returns a `make_layout` dict.

    The model behind it is the one of Narayanan et al. 2021 (sec. 3): TP within a node (its
    all-reduces sit on the critical path, so they need NVLink), PP across nodes (point to point,
    small) at the cost of the bubble (p-1)/(m+p-1), DP for the rest (one all-reduce per step).
    Keyword options (`planner_terms`, defaults = the model above): `chunks`, `recompute`,
    `grad_bytes`, `vocab`, `order` go to `layout_memory_per_rank`/`layout_step_time`; `cp` the
    context-parallel degrees to try (`candidate_layouts`). With chunks = v > 1 a layout with
    p > 1 whose stage layers or micro-batches v / p do not divide is skipped.
    """
    v, rc, g, V, order = _pt.check_extras(chunks, recompute, grad_bytes, vocab, order)
    mem_kw = dict(chunks=v, recompute=rc, grad_bytes=g, vocab=V)
    z = zero
    if isinstance(z, bool) or z not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {z!r}")
    if not isinstance(sp, bool):
        raise ValueError(f"sp must be True or False, got {sp!r}")
    if not isinstance(reshard_after_forward, bool):
        raise ValueError(f"reshard_after_forward must be True or False, got {reshard_after_forward!r}")
    _, _, _, M, _, _ = _cluster(cluster)
    L, h = model["layers"], model["hidden"]
    best, key = None, None
    B, b = model["global_batch"], model["micro_batch"]
    for lay in candidate_layouts(model, cluster, zero, sp, cp=cp):
        if v > 1 and lay["pp"] > 1 and ((L // lay["pp"]) % v or (B // (lay["dp"] * b)) % lay["pp"]):
            continue
        held = 2.0 * 12 * h * h * (L // lay["pp"]) / lay["tp"] if (z == 3 and not reshard_after_forward) else 0.0
        if layout_memory_per_rank(lay, model, **mem_kw)["total"] + held > M:
            continue
        k = (layout_step_time(lay, model, cluster, reshard_after_forward, order=order, **mem_kw)["total"],
             lay["tp"], lay["pp"], lay["cp"])
        if key is None or k < key:
            best, key = lay, k
    return best
