"""Test machinery for assignment 12, exercises 1 (mixture of experts, expert parallelism); not an answer.

* Oracles written the long way, independent of the references: `dense_route` (softmax, sort,
  renormalise), `dense_keep` (a loop over the assignments in GShard's priority order),
  `dense_moe` (every expert on every token, weighted by a dense (T, E) gate matrix: the
  computation an MoE layer must equal).
* `course_top_k_route`, `course_capacity`: the course's copies of the router and the capacity
  rule, swapped in for the student's own when a later answer is graded (one slip, one cell).
* `CountingExpert`: wraps an expert and counts the rows it is called on (sparse compute:
  an expert sees only its own tokens).
* `TypedCommCounter`: `CommCounter` that also splits the bytes of each operation into
  floating-point (token rows) and integer (split sizes) tensors.
* Cases: `moe_case` (seeded x, router weight, small MLP experts, float64), `skewed_router`.
* `ep_rank`: one rank of an expert-parallel check, returning outputs, gradients and counts.
* `ORACLES`: what the answers may not call (`no_delegation`), with the references.
"""
from __future__ import annotations

import copy

import torch
import torch.distributed as dist

from .dist.counting import CommCounter, _SIZED_BY

__all__ = ["dense_route", "dense_keep", "dense_moe", "course_top_k_route", "course_capacity", "CountingExpert",
           "TypedCommCounter", "moe_case", "ep_rank", "ep_one_process", "forbidden"]


# ------------------------------------------------------------------------------- oracles

def dense_route(logits, k):
    """(gates, experts) of top-k softmax routing, computed the long way (sort, then divide)."""
    p = torch.exp(logits - logits.max(dim=1, keepdim=True).values)
    p = p / p.sum(dim=1, keepdim=True)
    order = torch.argsort(p, dim=1, descending=True, stable=True)[:, :k]
    top = torch.gather(p, 1, order)
    return top / top.sum(dim=1, keepdim=True), order


def dense_keep(experts, n_experts, capacity):
    """Bool (T, k): GShard's priority (all first choices in token order, then the second ...),
    each expert keeps its first `capacity`; a plain loop."""
    T, k = experts.shape
    used = [0] * n_experts
    keep = torch.zeros(T, k, dtype=torch.bool)
    for j in range(k):
        for t in range(T):
            e = int(experts[t, j])
            if used[e] < capacity:
                keep[t, j] = True
                used[e] += 1
    return keep


def dense_moe(x, router_weight, experts, top_k, capacity=None):
    """The MoE layer as one dense computation: sum_e G[:, e] * expert_e(x) over all tokens, with
    G (T, E) the gates of the kept assignments (0 elsewhere). `capacity`: slots per expert."""
    gates, idx = dense_route(x @ router_weight, top_k)
    if capacity is not None:
        gates = gates * dense_keep(idx, router_weight.shape[1], capacity).to(gates.dtype)
    G = torch.zeros(x.shape[0], router_weight.shape[1], dtype=x.dtype).scatter_add(1, idx, gates)
    return sum(G[:, e:e + 1] * experts[e](x) for e in range(len(experts)))


def course_top_k_route(logits, k):
    """The course's top-k router (swapped in when a later answer is graded)."""
    probs = torch.softmax(logits, dim=-1)
    top, idx = probs.topk(k, dim=-1)
    return top / top.sum(dim=-1, keepdim=True), idx


def course_capacity(tokens, n_experts, top_k, capacity_factor):
    """The course's ceil(capacity_factor * tokens * top_k / n_experts)."""
    import math
    x = capacity_factor * tokens * top_k / n_experts
    return int(math.ceil(x - 1e-9 * max(1.0, x)))


def course_keep(experts, n_experts, capacity):
    """The course's capacity_keep (GShard's priority order)."""
    return dense_keep(experts, n_experts, capacity)


# ------------------------------------------------------------------------------ measuring

class CountingExpert(torch.nn.Module):
    """An expert that counts the rows it was called on (`rows`) and its calls (`calls`)."""

    def __init__(self, expert):
        super().__init__()
        self.expert, self.rows, self.calls = expert, 0, 0

    def forward(self, x):
        self.rows += int(x.shape[0])
        self.calls += 1
        return self.expert(x)


def _is_float(buf) -> bool:
    if isinstance(buf, (list, tuple)):
        return any(_is_float(b) for b in buf)
    return bool(buf.is_floating_point())


class TypedCommCounter(CommCounter):
    """CommCounter; also `float_bytes[op]` and `int_bytes[op]`: the bytes of each operation in
    floating-point (token rows, gradients) and in integer tensors (split sizes)."""

    def __init__(self):
        super().__init__()
        self.float_bytes, self.int_bytes = {}, {}

    def _wrap(self, name, fn):
        counted = super()._wrap(name, fn)
        sized_by = _SIZED_BY[name]

        def typed(*args, **kwargs):
            if self._depth == 0:
                before = self.bytes[name]
                buf = sized_by(args, kwargs)
                out = None
                try:
                    out = counted(*args, **kwargs)
                finally:
                    added = self.bytes[name] - before
                    if buf is not None and added:
                        side = self.float_bytes if _is_float(buf) else self.int_bytes
                        side[name] = side.get(name, 0) + added
                return out
            return counted(*args, **kwargs)

        typed.__wrapped__ = fn
        typed.__name__ = name
        return typed

    def kinds(self) -> dict:
        """{op: calls} of the operations used."""
        return {op: int(c) for op, c in sorted(self.calls.items()) if c}


A2A = ("all_to_all", "all_to_all_single")


# --------------------------------------------------------------------------------- cases

def moe_case(seed, tokens, hidden, n_experts, ffn=8, skew=0.0, dtype=torch.float64):
    """(x (T, h), router_weight (h, E), experts (ModuleList of E MLPs)), seeded. `skew` > 0 adds
    a bias toward the first experts, so the load is uneven and some experts get no token."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=g, dtype=dtype)
    w = torch.randn(hidden, n_experts, generator=g, dtype=dtype) / hidden ** 0.5
    if skew:
        x = x.abs()
        w[:, : max(1, n_experts // 4)] += skew / hidden
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        experts = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(hidden, ffn), torch.nn.GELU(),
                                                          torch.nn.Linear(ffn, hidden)).to(dtype)
                                      for _ in range(n_experts))
    return x, w, experts


def one_process_grads(fn, x, w, experts, out_weight):
    """(y, dx, dw, [expert parameter gradients]) of loss = sum(fn(x, w, experts) * out_weight)."""
    x = x.clone().requires_grad_(True)
    w = w.clone().requires_grad_(True)
    experts = copy.deepcopy(experts)
    y = fn(x, w, experts)
    (y * out_weight).sum().backward()
    return y.detach(), x.grad, w.grad, [torch.zeros_like(p) if p.grad is None else p.grad.clone()
                                        for e in experts for p in e.parameters()]


def ep_one_process(case, world, top_k, ep=None):
    """The one-process oracle of an EP check: dense MoE on every rank's tokens at once.
    Returns y, dx, dw, expert grads, and the per-rank token slices."""
    xs, w, experts, ows = case
    return one_process_grads(lambda x, w, ex: dense_moe(x, w, ex, top_k), torch.cat(xs), w, experts, torch.cat(ows))


def ep_case(seed, world, tokens, hidden, n_experts, skew=0.0, ffn=8):
    """xs (one (T_r, h) per rank, T_r varying), router weight, experts, output weights per rank."""
    x, w, experts = moe_case(seed, tokens * world + world, hidden, n_experts, ffn=ffn, skew=skew)
    sizes = [tokens + (r % 3) for r in range(world)]          # ranks hold different token counts
    xs = list(torch.split(x[:sum(sizes)], sizes))
    g = torch.Generator().manual_seed(seed + 7)
    ows = [torch.randn(s, hidden, generator=g, dtype=x.dtype) for s in sizes]
    return xs, w, experts, ows


def ep_rank(rank, world, ep_moe, case, top_k, ep, forbidden_objs):
    """One rank of the EP check: this rank's tokens through the student's `ep_moe`, then
    backward of sum(y * out_weight). `ep`: EP group size (< world: an EP x DP mesh built here).
    Returns y, dx, the router gradient, {global expert index: parameter gradients}, the counts
    of the forward and the backward, and the rows each local expert was called on."""
    from .grading import no_delegation
    xs, w, experts, ows = case
    n = len(experts)
    group = None
    ep_rank_, n_ep = rank, world
    if ep != world:
        ep_groups = [dist.new_group(list(range(d * ep, (d + 1) * ep))) for d in range(world // ep)]
        group, ep_rank_, n_ep = ep_groups[rank // ep], rank % ep, ep
    per = n // n_ep
    ids = list(range(ep_rank_ * per, (ep_rank_ + 1) * per))
    local = [CountingExpert(copy.deepcopy(experts[i])) for i in ids]
    x = xs[rank].clone().requires_grad_(True)
    wr = w.clone().requires_grad_(True)
    with no_delegation("ep_moe", *forbidden_objs):
        with TypedCommCounter() as fwd:
            y = ep_moe(x, wr, local, top_k, n, group=group) if group is not None else ep_moe(x, wr, local, top_k, n)
        rows = [e.rows for e in local]
        with TypedCommCounter() as bwd:
            (y * ows[rank]).sum().backward()
    grads = {i: [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in e.expert.parameters()]
             for i, e in zip(ids, local)}
    return dict(y=y.detach(), dx=x.grad, dw=wr.grad, grads=grads, rows=rows,
                fwd=(dict(fwd.float_bytes), dict(fwd.int_bytes), fwd.kinds()),
                bwd=(dict(bwd.float_bytes), dict(bwd.int_bytes), bwd.kinds()))


def assemble_ep(results, n_experts, n_params):
    """Concatenate the ranks' outputs and input gradients, sum the router gradients over ranks,
    and sum each expert's parameter gradients over its replicas: comparable with `ep_one_process`."""
    y = torch.cat([r["y"] for r in results])
    dx = torch.cat([r["dx"] if r["dx"] is not None else torch.zeros_like(r["y"]) for r in results])
    dw = sum(r["dw"] if r["dw"] is not None else 0 for r in results)
    grads = []
    for e in range(n_experts):
        per = [r["grads"][e] for r in results if e in r["grads"]]
        grads += [sum(gs) for gs in zip(*per)]
    return y, dx, dw, grads


def expected_rows(x, w, top_k, n_experts, capacity=None):
    """Rows each expert must be called on: its (kept) assignments, from the dense oracle."""
    _, idx = dense_route(x @ w, top_k)
    keep = dense_keep(idx, n_experts, capacity) if capacity is not None else torch.ones_like(idx, dtype=torch.bool)
    return [int(((idx == e) & keep).sum()) for e in range(n_experts)]


def forbidden(*allowed):
    """What an answer may not call: the references (`moe`, `dist.expert_parallel`) and the oracles
    of this module, except the course copies in `allowed` (swapped in for upstream answers)."""
    from . import moe as _moe
    from .dist import expert_parallel as _ep
    mine = (dense_route, dense_keep, dense_moe, course_top_k_route, course_capacity, course_keep,
            one_process_grads, ep_one_process)
    return (_moe, _ep) + tuple(f for f in mine if f not in allowed)
