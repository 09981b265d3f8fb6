"""Pipeline parallelism by hand: stages on ranks, activations and gradients over point-to-point
messages, the AFAB (GPipe) and 1F1B (PipeDream-Flush) schedules.

    stage = PipelineStage(part, act_shape=(mb, s, h), dtype=torch.float64, loss_fn=F.cross_entropy-like)
    out = run_1f1b(stage, inputs, targets)      # or run_afab; every rank calls it with its stage
    out["losses"], out["order"], out["peak_in_flight"], out["p2p"]

Schedules with p stages and m micro-batches:
* AFAB / GPipe (Huang et al. 2019): every stage runs the m forwards, then the m backwards; it
  holds the activations of all m micro-batches at the peak.
* 1F1B / PipeDream-Flush (Narayanan et al. 2021): stage s runs min(p - s - 1, m) warm-up
  forwards, then alternates one forward and one backward, then drains the remaining backwards;
  it holds at most min(p - s, m) <= p micro-batches.
Both have the same bubble with unit-cost forward and backward slots: (p-1)/(m+p-1) of the step
(`solutions_lib.parallel.pipeline_bubble_fraction`). Gradients equal one process accumulating
the same micro-batches (loss_i / m each), since every stage runs the same operations on the
same data and backwards accumulate in micro-batch order.

Messages: every send and receive goes through `dist.batch_isend_irecv`; a send is posted at once
(and kept until the step ends), and when the stage's next action starts with a receive, that
receive is posted in the same batch and waited for when the action runs (Megatron-LM's
send_forward_recv_backward / send_backward_recv_forward pairs). On gloo a send never blocks and
only receives do, so a schedule whose dependencies are acyclic cannot deadlock; on NCCL a send may
hold the GPU stream until its receive is posted, and one unbatched send and receive each can
deadlock 1F1B (stage s sends activation i+1 while stage s+1 sends gradient i): batched with the
receive that follows it, every send progresses together with it. Receive buffers are allocated on
the stage's device (`device=`, default: that of the module's parameters). Each stage counts its
own messages (`stage.p2p`: calls and bytes per direction). A stage's executed order is recorded;
`pipeline_timeline` replays those orders with unit-cost slots and the data dependencies
(F(s,i) after F(s-1,i); B(s,i) after B(s+1,i)) to give each action its slot, the idle slots
and the measured bubble.

Interleaved 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", sec. 2.2): the model is cut into v p chunks (virtual stages) and rank
r holds chunks r, r + p, ..., r + (v-1) p (`split_transformer(model, p * v)[r::p]`), so virtual
stage k = c p + r is chunk c of rank r. m must be a multiple of p (micro-batches go through in
groups of p). `interleaved_schedule_order` gives rank r's (kind, micro-batch, chunk) order
(Megatron's forward_backward_pipelining_with_interleaving, the order of
`solutions_lib.parallel.simulate_pipeline(p, m, "interleaved", v)`): forward number k runs
micro-batch (k // (p v)) p + k % p on chunk (k // p) % v, backward number k the same micro-batch
on chunk v - 1 - (k // p) % v; rank r runs w_r = min(2 (p - r - 1) + (v - 1) p, v m) warm-up
forwards (all v m when m = p), then alternates one forward and one backward, then drains the w_r
remaining backwards.
* Bubble, with every chunk forward and backward one unit slot (the replay of the executed orders
  by `pipeline_timeline`, which then knows the chunk dependency: F(k, i) after F(k-1, i), B(k, i)
  after B(k+1, i), the wrap-around from rank p-1 to the next chunk on rank 0 included): each rank
  idles 2 (p - 1) slots out of 2 (v m + p - 1), i.e. idle / step time = (p-1)/(v m + p - 1)
  (denominator "total", `pipeline_bubble_fraction(p, m, "interleaved", v)`), or idle / busy
  time = (p-1)/(v m) (Megatron's "ideal" denominator, `pipeline_bubble_ratio`): v times smaller
  than 1F1B's (p-1)/m.
* Memory: rank r holds at most min(w_r + 1, v m) chunk activations (v m when m = p), each 1/v of a
  whole stage's: (2 (p-1) + (v-1) p + 1) / v = p + (p-1)/v stage activations on rank 0 against
  1F1B's p, the extra warm-up memory Megatron-LM pays for the smaller bubble
  (`solutions_lib.parallel.pipeline_peak_activations(..., "interleaved", v)` in stage units).
* Messages: every chunk but the first receives its input activation and sends its input gradient,
  every chunk but the last sends its output and receives its gradient, so rank r sends (and
  receives) (2 v - [r = 0] - [r = p-1]) m activation-sized messages per step
  (`interleaved_p2p_bytes`): v times 1F1B's 2 m on an inner rank, (2 v - 1) m on an end rank
  (1F1B: m); 2 (v p - 1) m in all against 2 (p - 1) m.
* Batches: as Megatron-LM (send_forward_backward_recv_forward_backward), the schedule runs in
  steps (a warm-up forward, a steady (forward, backward) pair, a cool-down backward), and after
  each step one `batch_isend_irecv` holds the step's sends and the receives of the next step
  (`interleaved_batches` gives them without ranks). Every send is thus batched with receives of
  its own rank, the n-th message from rank a to rank b is the n-th receive b posts from a (also
  for p = 2, where both directions of a pair carry activations and gradients), and a replay
  under NCCL's rules (a send may wait for its receive) finds no deadlock
  (tests/test_dist_pp.py, with tests/test_dist_nccl_part2.py's replay).
"""
from __future__ import annotations

import time
from collections import Counter

import torch
import torch.distributed as dist
import torch.nn as nn

from . import waits as _waits

__all__ = ["PipelineStage", "run_afab", "run_1f1b", "schedule_order", "pipeline_timeline",
           "pipeline_p2p_bytes", "TransformerStage", "split_transformer",
           "InterleavedStage", "run_interleaved", "interleaved_schedule_order", "interleaved_warmup",
           "interleaved_batches", "interleaved_p2p_bytes", "interleaved_peak_in_flight"]


class PipelineStage:
    """One stage of a pipeline on this rank: `module` is its part of the model.

    Stage index = rank in `group` (default: the world); stage s receives from s-1 and sends to
    s+1. `act_shape` and `dtype`: the activation passed between stages for one micro-batch
    (known up front, so no shape message). The last stage computes `loss_fn(output, target)`.
    `device`: where received activations and gradients are put (default: the device of the
    module's first parameter or buffer, else the CPU); under NCCL the rank's GPU.
    """

    def __init__(self, module: nn.Module, act_shape, dtype=torch.float32, group=None, loss_fn=None, device=None):
        self.module, self.group = module, group
        self.device = torch.device(device) if device is not None else _module_device(module)
        self.stage, self.n_stages = dist.get_rank(group), dist.get_world_size(group)
        self.act_shape, self.dtype = tuple(act_shape), dtype
        if any((not isinstance(n, int)) or n < 1 for n in self.act_shape):
            raise ValueError(f"act_shape must be positive ints, got {act_shape!r}")
        self.is_first, self.is_last = self.stage == 0, self.stage == self.n_stages - 1
        if self.is_last and loss_fn is None:
            raise ValueError("the last stage needs a loss_fn(output, target)")
        self.loss_fn = loss_fn
        self._global = lambda r: dist.get_global_rank(group, r) if group is not None else r
        self.p2p = {"send": Counter(), "recv": Counter()}  # calls, bytes
        self._reset()

    def _reset(self):
        self.stash: dict[int, tuple] = {}
        self.peak_in_flight = 0
        self.order: list[tuple[str, int]] = []
        self.times: list[tuple[str, int, float, float]] = []
        self.losses: dict[int, float] = {}
        self._pending = []     # (works, tensor) of the posted sends, waited for in finish()
        self._next = None      # the action after the running one (set by the schedule runner)
        self._posted = None    # (peer, buffer, work): a receive posted with the last send

    def _recv_op(self, frm: int):
        t = torch.empty(self.act_shape, dtype=self.dtype, device=self.device)
        return t, dist.P2POp(dist.irecv, t, self._global(frm), group=self.group)

    def _next_recv_peer(self):
        """The stage the next action receives from, or None (no next action, or no receive)."""
        if self._next is None:
            return None
        kind, _ = self._next
        if kind == "F":
            return None if self.is_first else self.stage - 1
        return None if self.is_last else self.stage + 1

    def _send(self, t: torch.Tensor, to: int):
        t = t.detach().contiguous()
        ops = [dist.P2POp(dist.isend, t, self._global(to), group=self.group)]
        peer = self._next_recv_peer()
        if peer is not None:
            buf, op = self._recv_op(peer)
            ops.append(op)
        works = dist.batch_isend_irecv(ops)  # gloo: one work per op; NCCL: one for the batch
        if peer is not None:
            self._posted = (peer, buf, works[-1])
            # the receive's work is waited for when it is used (on gloo a second wait would hang);
            # NCCL's single work for the batch covers the send too
            works = works[:-1] if len(works) == len(ops) else []
        self._pending.append((works, t))
        self.p2p["send"]["calls"] += 1
        self.p2p["send"]["bytes"] += t.numel() * t.element_size()

    def _recv(self, frm: int) -> torch.Tensor:
        if self._posted is not None:
            peer, t, work = self._posted
            self._posted = None
            if peer != frm:
                raise RuntimeError(f"stage {self.stage}: a receive from {peer} was posted, "
                                   f"the action receives from {frm}")
        else:
            t, op = self._recv_op(frm)
            work = dist.batch_isend_irecv([op])[-1]
        with _waits.waiting_for(f"the {'activation' if frm < self.stage else 'gradient'} from stage {frm}"):
            work.wait()
        self.p2p["recv"]["calls"] += 1
        self.p2p["recv"]["bytes"] += t.numel() * t.element_size()
        return t

    def forward_step(self, i: int, x=None, target=None, m: int = 1):
        t0 = time.perf_counter()
        inp = x if self.is_first else self._recv(self.stage - 1).requires_grad_(True)
        out = self.module(inp)
        if self.is_last:
            loss = self.loss_fn(out, target)
            self.losses[i] = float(loss.detach())
            out = loss / m
        else:
            if tuple(out.shape) != self.act_shape:
                raise ValueError(f"stage {self.stage} produced {tuple(out.shape)}, act_shape is {self.act_shape}")
            self._send(out, self.stage + 1)
        self.stash[i] = (inp, out)
        self.peak_in_flight = max(self.peak_in_flight, len(self.stash))
        self.order.append(("F", i))
        self.times.append(("F", i, t0, time.perf_counter()))

    def backward_step(self, i: int):
        t0 = time.perf_counter()
        inp, out = self.stash.pop(i)
        if self.is_last:
            out.backward()
        else:
            out.backward(self._recv(self.stage + 1))
        if not self.is_first:
            self._send(inp.grad, self.stage - 1)
        self.order.append(("B", i))
        self.times.append(("B", i, t0, time.perf_counter()))

    def finish(self):
        if self._posted is not None:
            raise RuntimeError(f"stage {self.stage}: a receive from {self._posted[0]} was posted and never used")
        for works, _ in self._pending:
            for work in works:
                work.wait()
        self._pending.clear()

    def result(self) -> dict:
        return {"stage": self.stage, "losses": [self.losses[i] for i in sorted(self.losses)],
                "order": list(self.order), "times": list(self.times), "peak_in_flight": self.peak_in_flight,
                "p2p": {k: dict(v) for k, v in self.p2p.items()}}


def _module_device(module: nn.Module) -> torch.device:
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")


def schedule_order(schedule: str, stage: int, n_stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """The order of ("F", i) / ("B", i) actions stage `stage` runs.

    afab: F0 .. F(m-1), B0 .. B(m-1) (GPipe, Huang et al. 2019).
    1f1b: w = min(p - s - 1, m) warm-up forwards, then (F, B) pairs, then the last w backwards
    (PipeDream-Flush, Narayanan et al. 2021)."""
    p, m = _count("n_stages", n_stages), _count("micro_batches", micro_batches)
    if not isinstance(stage, int) or not 0 <= stage < p:
        raise ValueError(f"stage must be in 0..{p - 1}, got {stage!r}")
    if schedule == "afab":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    if schedule != "1f1b":
        raise ValueError(f"schedule must be 'afab' or '1f1b', got {schedule!r}")
    w = min(p - stage - 1, m)
    order = [("F", i) for i in range(w)]
    for j in range(m - w):
        order += [("F", w + j), ("B", j)]
    return order + [("B", i) for i in range(m - w, m)]


def _count(name, v, minimum=1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")
    return v


def _run(schedule, stage: PipelineStage, inputs, targets):
    m = _count("micro_batches (len(inputs))", len(inputs))
    if len(targets) != m:
        raise ValueError(f"inputs and targets must hold one entry per micro-batch: {m} inputs, {len(targets)} targets")
    stage._reset()
    order = schedule_order(schedule, stage.stage, stage.n_stages, m)
    for k, (kind, i) in enumerate(order):
        stage._next = order[k + 1] if k + 1 < len(order) else None
        if kind == "F":
            stage.forward_step(i, inputs[i] if stage.is_first else None,
                               targets[i] if stage.is_last else None, m)
        else:
            stage.backward_step(i)
    stage.finish()
    return stage.result()


def run_afab(stage: PipelineStage, inputs, targets) -> dict:
    """One training step (forwards and backwards; no optimizer step) with the all-forward
    all-backward schedule (GPipe). Every rank passes the same number of micro-batches: `inputs`
    are used on the first stage, `targets` on the last (pass a list of m placeholders elsewhere).
    The loss of micro-batch i is backpropagated as loss_i / m. Returns `PipelineStage.result()`."""
    return _run("afab", stage, inputs, targets)


def run_1f1b(stage: PipelineStage, inputs, targets) -> dict:
    """As `run_afab` with the one-forward-one-backward schedule (PipeDream-Flush)."""
    return _run("1f1b", stage, inputs, targets)


def pipeline_timeline(orders, forward_slots: int = 1, backward_slots: int = 1) -> dict:
    """Slots of every action from the stages' executed orders (orders[s] = [("F", i), ...]).

    Each action starts when its stage is free and its input is there (F(s,i) after F(s-1,i) ends;
    B(s,i) after B(s+1,i) ends; on the last stage B(i) after F(i)), and lasts forward_slots or
    backward_slots. Returns {"slots": per stage [(kind, i, start, end)], "span", "idle" (per
    stage, slots), "bubble" (idle / (p * span), the measured counterpart of (p-1)/(m+p-1)),
    "bubble_ideal" (idle / busy slots, Megatron's denominator: (p-1)/m), "grid" (per stage a
    string, one character per slot: the micro-batch's digit for a forward, its letter a, b, ...
    for a backward, "." when idle)}.

    Interleaved orders, orders[s] = [("F", i, c), ...] with c the model chunk: chunk c of stage s
    is virtual stage k = c p + s of v p (v = 1 + the largest chunk), the dependencies run over
    virtual stages (F(k,i) after F(k-1,i), also from stage p-1 to the next chunk on stage 0; B(k,i)
    after B(k+1,i); B(i) after F(i) on the last virtual stage), every chunk action lasts
    forward_slots or backward_slots, and the slots are (kind, i, c, start, end).
    """
    p = len(orders)
    cost = {"F": _count("forward_slots", forward_slots), "B": _count("backward_slots", backward_slots)}
    chunked = any(len(a) == 3 for o in orders for a in o)
    if chunked and not all(len(a) == 3 for o in orders for a in o):
        raise ValueError("orders mix (kind, i) and (kind, i, chunk) actions")
    n_virtual = p * (1 + max((a[2] for o in orders for a in o), default=0)) if chunked else p
    end: dict[tuple[str, int, int], int] = {}
    free = [0] * p
    pos = [0] * p
    slots = [[] for _ in range(p)]
    while any(pos[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i = orders[s][pos[s]][:2]
                c = orders[s][pos[s]][2] if chunked else 0
                k = c * p + s
                dep = (("F", k - 1, i) if k > 0 else None) if kind == "F" else \
                      (("B", k + 1, i) if k < n_virtual - 1 else ("F", k, i))
                if dep is not None and dep not in end:
                    break
                start = max(free[s], end[dep] if dep else 0)
                end[(kind, k, i)] = free[s] = start + cost[kind]
                slots[s].append((kind, i, c, start, free[s]) if chunked else (kind, i, start, free[s]))
                pos[s] += 1
                progressed = True
        if not progressed:
            raise ValueError(_deadlock_text(orders, pos, chunked, n_virtual))
    span = max(free)
    busy = [sum(row[-1] - row[-2] for row in stage) for stage in slots]
    idle = [span - x for x in busy]
    grid = []
    for row in slots:
        line = ["."] * span
        for a in row:
            kind, i, b, e = a[0], a[1], a[-2], a[-1]
            for t in range(b, e):
                line[t] = (str(i % 10) if kind == "F" else chr(ord("a") + i % 26))
        grid.append("".join(line))
    return {"slots": slots, "span": span, "idle": idle, "bubble": sum(idle) / (p * span),
            "bubble_ideal": sum(idle) / max(1, sum(busy)), "grid": grid}


def _deadlock_text(orders, pos, chunked: bool, n_virtual: int) -> str:
    """What `pipeline_timeline` says when no stage can go on: p, m, and for every stuck stage the
    action it is stuck at and the one it waits for, and whether that one is in any order."""
    p = len(orders)
    fwd = [sorted({a[1] for a in o if a[0] == "F"}) for o in orders]
    m_text = f"m = {len(fwd[-1])} micro-batches, the last stage's forwards"
    odd = [f"stage {s} runs {len(f)} forwards (micro-batches {f[:6]}{'...' if len(f) > 6 else ''})"
           for s, f in enumerate(fwd) if f != fwd[-1]]
    if odd:
        m_text += "; " + ", ".join(odd)
    where = {}
    for s, o in enumerate(orders):
        for a in o:
            c = a[2] if chunked else 0
            where.setdefault((a[0], c * p + s, a[1]), s)
    name = (lambda kind, k, i: f"{kind}(chunk {k // p} of stage {k % p}, {i})") if chunked else \
        (lambda kind, k, i: f"{kind}({k}, {i})")
    stuck = []
    for s in range(p):
        if pos[s] >= len(orders[s]):
            continue
        kind, i = orders[s][pos[s]][:2]
        c = orders[s][pos[s]][2] if chunked else 0
        k = c * p + s
        dep = ("F", k - 1, i) if kind == "F" else (("B", k + 1, i) if k < n_virtual - 1 else ("F", k, i))
        owner = where.get(dep)
        why = (f"which no stage's order holds" if owner is None else
               f"which stage {owner} runs only after an action that waits itself")
        stuck.append(f"stage {s} is stuck at action {pos[s]} of its order, {name(kind, k, i)}, which needs "
                     f"{name(*dep)}, {why}")
    return (f"the orders deadlock (p = {p} stages, {m_text}): " + "; ".join(stuck) + ". Every stage must run "
            "F and B of the same micro-batches, each F after the one before it in the pipeline (1F1B: "
            "w_s = min(p - s - 1, m) warm-up forwards, never more than m).")


def pipeline_p2p_bytes(stage: int, n_stages: int, micro_batches: int, act_numel: int,
                       bytes_per_element: int = 4) -> dict[str, int]:
    """Bytes stage s sends and receives in one step (either schedule): m activations forward to
    s+1 and m gradients back to s-1; the first stage receives no activations, the last sends none.
    Units: bytes per rank per step."""
    p, m = _count("n_stages", n_stages), _count("micro_batches", micro_batches)
    a, e = _count("act_numel", act_numel), _count("bytes_per_element", bytes_per_element)
    if not 0 <= stage < p:
        raise ValueError(f"stage must be in 0..{p - 1}, got {stage!r}")
    links = (stage > 0) + (stage < p - 1)
    return {"send": links * m * a * e, "recv": links * m * a * e}


# ---------------------------------------------------------------- interleaved 1F1B (virtual stages)


def _interleaved_args(stage, n_stages, micro_batches, chunks) -> tuple[int, int, int]:
    p, m, v = _count("n_stages", n_stages), _count("micro_batches", micro_batches), _count("chunks", chunks)
    if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < p:
        raise ValueError(f"stage must be in 0..{p - 1}, got {stage!r}")
    if m % p:
        raise ValueError(f"the interleaved schedule sends micro-batches through in groups of n_stages: "
                         f"micro_batches={m} must be a multiple of n_stages={p}")
    return p, m, v


def interleaved_warmup(stage: int, n_stages: int, micro_batches: int, chunks: int) -> int:
    """Warm-up forwards of rank `stage` in the interleaved schedule (Megatron-LM):
    min(2 (p - stage - 1) + (v - 1) p, v m), and all v m when m = p (then every forward runs first)."""
    p, m, v = _interleaved_args(stage, n_stages, micro_batches, chunks)
    return v * m if m == p else min(2 * (p - stage - 1) + (v - 1) * p, v * m)


def interleaved_schedule_order(stage: int, n_stages: int, micro_batches: int,
                               chunks: int) -> list[tuple[str, int, int]]:
    """The order of ("F", i, c) / ("B", i, c) actions (micro-batch i on the rank's model chunk c,
    virtual stage c p + stage) of rank `stage` in Megatron-LM's interleaved 1F1B schedule
    (Narayanan et al. 2021, sec. 2.2). Forward number k: micro-batch (k // (p v)) p + k % p on
    chunk (k // p) % v (p micro-batches through chunk 0, the same p through chunk 1, ..., then the
    next p); backward number k: the same micro-batch on chunk v - 1 - (k // p) % v. The rank runs
    w = `interleaved_warmup` forwards, then (forward w + j, backward j) pairs, then the last w
    backwards. m must be a multiple of p."""
    p, m, v = _interleaved_args(stage, n_stages, micro_batches, chunks)
    total, w = v * m, interleaved_warmup(stage, p, m, v)

    def micro_batch(k):
        return (k // (p * v)) * p + k % p

    fwd = [("F", micro_batch(k), (k // p) % v) for k in range(total)]
    bwd = [("B", micro_batch(k), v - 1 - (k // p) % v) for k in range(total)]
    order = fwd[:w]
    for j in range(total - w):
        order += [fwd[w + j], bwd[j]]
    return order + bwd[total - w:]


def _interleaved_steps(stage, p, m, v) -> list[list[tuple[str, int, int]]]:
    """The order cut into Megatron's steps: one warm-up forward, one steady (forward, backward)
    pair, one cool-down backward each."""
    order, w = interleaved_schedule_order(stage, p, m, v), interleaved_warmup(stage, p, m, v)
    steady = len(order) - 2 * w
    return ([[a] for a in order[:w]] + [order[w + 2 * j:w + 2 * j + 2] for j in range(steady // 2)]
            + [[a] for a in order[w + steady:]])


def interleaved_batches(stage: int, n_stages: int, micro_batches: int, chunks: int) -> list[tuple]:
    """What rank `stage` does in the interleaved schedule, in order: ("run", (kind, i, c)) for an
    action and ("post", ops) for one `batch_isend_irecv`, ops = [("S", peer, msg) / ("R", peer,
    msg)] with msg = ("act", i, k) (the output of micro-batch i on virtual stage k, sent to k+1) or
    ("grad", i, k) (the gradient of its input on virtual stage k, sent to k-1). Activations go to
    rank stage+1 mod p, gradients to stage-1 mod p. A first batch holds the receives of the first
    step; after each step one batch holds the step's sends and the receives of the next step
    (Megatron-LM's send_forward_backward_recv_forward_backward); `run_interleaved` executes
    exactly this list."""
    p, m, v = _interleaved_args(stage, n_stages, micro_batches, chunks)
    V, prev, nxt = v * p, (stage - 1) % p, (stage + 1) % p

    def receives(step):
        ops = []
        for kind, i, c in step:
            k = c * p + stage
            if kind == "F" and k > 0:
                ops.append(("R", prev, ("act", i, k - 1)))
            if kind == "B" and k < V - 1:
                ops.append(("R", nxt, ("grad", i, k + 1)))
        return ops

    def sends(step):
        ops = []
        for kind, i, c in step:
            k = c * p + stage
            if kind == "F" and k < V - 1:
                ops.append(("S", nxt, ("act", i, k)))
            if kind == "B" and k > 0:
                ops.append(("S", prev, ("grad", i, k)))
        return ops

    steps = _interleaved_steps(stage, p, m, v)
    plan = []
    if receives(steps[0]):
        plan.append(("post", receives(steps[0])))
    for t, step in enumerate(steps):
        plan += [("run", a) for a in step]
        ops = sends(step) + (receives(steps[t + 1]) if t + 1 < len(steps) else [])
        if ops:
            plan.append(("post", ops))
    return plan


def interleaved_p2p_bytes(stage: int, n_stages: int, micro_batches: int, chunks: int, act_numel: int,
                          bytes_per_element: int = 4) -> dict[str, int]:
    """Bytes rank `stage` sends and receives in one interleaved step: every one of its v chunks
    but the first virtual stage receives m activations and sends m input gradients, every one
    but the last sends m activations and receives m gradients: (2 v - [stage = 0] - [stage = p-1])
    m a e each way (a = act_numel, e = bytes_per_element). v times `pipeline_p2p_bytes` on an inner
    rank; (2 v - 1) m a e on an end rank (1F1B: m a e). Units: bytes per rank per step."""
    p, m, v = _interleaved_args(stage, n_stages, micro_batches, chunks)
    a, e = _count("act_numel", act_numel), _count("bytes_per_element", bytes_per_element)
    n = (2 * v - (stage == 0) - (stage == p - 1)) * m * a * e
    return {"send": n, "recv": n}


def interleaved_peak_in_flight(stage: int, n_stages: int, micro_batches: int, chunks: int) -> int:
    """Most chunk activations rank `stage` holds at once in the interleaved schedule:
    min(w + 1, v m) with w = `interleaved_warmup` (v m when m = p). One chunk activation is 1/v of
    a whole stage's (divide by v for `solutions_lib.parallel.pipeline_peak_activations`)."""
    p, m, v = _interleaved_args(stage, n_stages, micro_batches, chunks)
    return min(interleaved_warmup(stage, p, m, v) + 1, v * m)


class _Once:
    """Wait for a work at most once (gloo: one work per op, a second wait may hang; NCCL: one work
    covering a whole batch, shared by its ops)."""

    def __init__(self, work):
        self.work, self.done = work, work is None

    def wait(self):
        if not self.done:
            self.work.wait()
            self.done = True


class InterleavedStage(PipelineStage):
    """This rank's v model chunks of an interleaved pipeline: `chunks[c]` is virtual stage
    c p + rank of a model cut into v p parts (`split_transformer(model, p * v)[rank::p]`).
    Same arguments as `PipelineStage` otherwise; rank p-1 (holding the last chunk) needs loss_fn.
    Needs at least 2 ranks (chunks pass messages to the neighbouring ranks)."""

    def __init__(self, chunks, act_shape, dtype=torch.float32, group=None, loss_fn=None, device=None):
        chunks = list(chunks)
        if not chunks or not all(isinstance(c, nn.Module) for c in chunks):
            raise ValueError("chunks must be a non-empty list of nn.Module (this rank's model chunks)")
        super().__init__(nn.ModuleList(chunks), act_shape, dtype, group, loss_fn, device)
        if self.n_stages < 2:
            raise ValueError("an interleaved pipeline needs at least 2 ranks")
        self.chunks, self.v = chunks, len(chunks)

    def _reset(self):
        super()._reset()
        self._received: dict[tuple, tuple] = {}  # msg -> (buffer, _Once)
        self._outbox: dict[tuple, torch.Tensor] = {}

    def _post(self, ops):
        p2p, keep = [], []
        for kind, peer, msg in ops:
            if kind == "S":
                t = self._outbox.pop(msg).detach().contiguous()
                p2p.append(dist.P2POp(dist.isend, t, self._global(peer), group=self.group))
                self.p2p["send"]["calls"] += 1
                self.p2p["send"]["bytes"] += t.numel() * t.element_size()
            else:
                t, op = self._recv_op(peer)
                p2p.append(op)
            keep.append(t)
        works = dist.batch_isend_irecv(p2p)
        onces = [_Once(w) for w in works] if len(works) == len(ops) else \
            [_Once(works[-1] if works else None)] * len(ops)  # NCCL: one work for the batch
        for (kind, _, msg), t, once in zip(ops, keep, onces):
            if kind == "S":
                self._pending.append(([once], t))
            else:
                self._received[msg] = (t, once)

    def _take(self, msg) -> torch.Tensor:
        t, once = self._received.pop(msg)
        once.wait()
        self.p2p["recv"]["calls"] += 1
        self.p2p["recv"]["bytes"] += t.numel() * t.element_size()
        return t

    def chunk_forward(self, i: int, c: int, x=None, target=None, m: int = 1):
        t0 = time.perf_counter()
        p, k = self.n_stages, c * self.n_stages + self.stage
        last = k == self.v * p - 1
        inp = x if k == 0 else self._take(("act", i, k - 1)).requires_grad_(True)
        out = self.chunks[c](inp)
        if last:
            loss = self.loss_fn(out, target)
            self.losses[i] = float(loss.detach())
            out = loss / m
        else:
            if tuple(out.shape) != self.act_shape:
                raise ValueError(f"chunk {c} of stage {self.stage} produced {tuple(out.shape)}, "
                                 f"act_shape is {self.act_shape}")
            self._outbox[("act", i, k)] = out
        self.stash[(i, c)] = (inp, out)
        self.peak_in_flight = max(self.peak_in_flight, len(self.stash))
        self.order.append(("F", i, c))
        self.times.append(("F", i, c, t0, time.perf_counter()))

    def chunk_backward(self, i: int, c: int):
        t0 = time.perf_counter()
        p, k = self.n_stages, c * self.n_stages + self.stage
        inp, out = self.stash.pop((i, c))
        if k == self.v * p - 1:
            out.backward()
        else:
            out.backward(self._take(("grad", i, k + 1)))
        if k > 0:
            self._outbox[("grad", i, k)] = inp.grad
        self.order.append(("B", i, c))
        self.times.append(("B", i, c, t0, time.perf_counter()))

    def finish(self):
        if self._received or self._outbox:
            raise RuntimeError(f"stage {self.stage}: messages left over: received {sorted(self._received)}, "
                               f"unsent {sorted(self._outbox)}")
        super().finish()

    def result(self) -> dict:
        out = super().result()
        out["chunks"] = self.v
        return out


def run_interleaved(stage: InterleavedStage, inputs, targets) -> dict:
    """One training step (forwards and backwards; no optimizer step) with Megatron-LM's
    interleaved 1F1B schedule on this rank's `InterleavedStage` (v chunks). As `run_1f1b`:
    every rank passes the same m micro-batches (a multiple of p); `inputs` are used on rank 0's
    chunk 0, `targets` on rank p-1's last chunk; loss_i / m is backpropagated. Executes
    `interleaved_batches` (steps, each followed by one batch of its sends and the next step's
    receives). Returns `PipelineStage.result()` with "order" = [(kind, i, chunk)],
    "peak_in_flight" in chunk activations (`interleaved_peak_in_flight`) and "chunks" = v."""
    if not isinstance(stage, InterleavedStage):
        raise ValueError(f"run_interleaved needs an InterleavedStage, got {type(stage).__name__}")
    m = _count("micro_batches (len(inputs))", len(inputs))
    if len(targets) != m:
        raise ValueError(f"inputs and targets must hold one entry per micro-batch: {m} inputs, {len(targets)} targets")
    p, v = stage.n_stages, stage.v
    plan = interleaved_batches(stage.stage, p, m, v)  # checks m % p
    stage._reset()
    for what, arg in plan:
        if what == "post":
            stage._post(arg)
            continue
        kind, i, c = arg
        if kind == "F":
            first, last = c == 0 and stage.is_first, c == v - 1 and stage.is_last
            stage.chunk_forward(i, c, inputs[i] if first else None, targets[i] if last else None, m)
        else:
            stage.chunk_backward(i, c)
    stage.finish()
    return stage.result()


# ---------------------------------------------------------------- a transformer cut into stages


class TransformerStage(nn.Module):
    """Blocks start..stop-1 of a `solutions_lib.models.CheckpointedTransformer`, sharing its
    parameters; the first stage also embeds (tokens + positions), the last also applies ln_f and
    the head. forward: token ids (b, s) or activations (b, s, h) -> activations or logits."""

    def __init__(self, model: nn.Module, start: int, stop: int, first: bool, last: bool):
        super().__init__()
        self.first, self.last = first, last
        self.blocks = nn.ModuleList(model.blocks[start:stop])
        if first:
            self.tok, self.pos = model.tok, model.pos
        if last:
            self.ln_f, self.head = model.ln_f, model.head
        self.register_buffer("causal", model.causal.clone(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        S = x.shape[1]
        if self.first:
            x = self.tok(x) + self.pos[:S]
        mask = self.causal[:S, :S]
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x)) if self.last else x


def split_transformer(model: nn.Module, n_stages: int) -> list[TransformerStage]:
    """Cut a CheckpointedTransformer into `n_stages` stages of layers / n_stages blocks each."""
    p = _count("n_stages", n_stages)
    L = len(model.blocks)
    if L % p:
        raise ValueError(f"n_stages={p} must divide the number of layers {L} (equal stages)")
    k = L // p
    return [TransformerStage(model, s * k, (s + 1) * k, s == 0, s == p - 1) for s in range(p)]
