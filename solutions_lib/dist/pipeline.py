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
"""
from __future__ import annotations

import time
from collections import Counter

import torch
import torch.distributed as dist
import torch.nn as nn

__all__ = ["PipelineStage", "run_afab", "run_1f1b", "schedule_order", "pipeline_timeline",
           "pipeline_p2p_bytes", "TransformerStage", "split_transformer"]


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
    "grid" (per stage a string, one character per slot: the micro-batch's digit for a forward,
    its letter a, b, ... for a backward, "." when idle)}.
    """
    p = len(orders)
    cost = {"F": _count("forward_slots", forward_slots), "B": _count("backward_slots", backward_slots)}
    end: dict[tuple[str, int, int], int] = {}
    free = [0] * p
    pos = [0] * p
    slots = [[] for _ in range(p)]
    while any(pos[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i = orders[s][pos[s]]
                dep = (("F", s - 1, i) if s > 0 else None) if kind == "F" else \
                      (("B", s + 1, i) if s < p - 1 else ("F", s, i))
                if dep is not None and dep not in end:
                    break
                start = max(free[s], end[dep] if dep else 0)
                end[(kind, s, i)] = free[s] = start + cost[kind]
                slots[s].append((kind, i, start, free[s]))
                pos[s] += 1
                progressed = True
        if not progressed:
            raise ValueError("the orders deadlock: some action waits for one that never runs")
    span = max(free)
    busy = [sum(e - b for _, _, b, e in row) for row in slots]
    idle = [span - x for x in busy]
    grid = []
    for row in slots:
        line = ["."] * span
        for kind, i, b, e in row:
            for t in range(b, e):
                line[t] = (str(i % 10) if kind == "F" else chr(ord("a") + i % 26))
        grid.append("".join(line))
    return {"slots": slots, "span": span, "idle": idle, "bubble": sum(idle) / (p * span), "grid": grid}


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
