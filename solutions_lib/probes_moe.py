"""Test machinery for assignment 12, exercises 1 (mixture of experts, expert parallelism); not an answer.

* Oracles written the long way, independent of the references: `dense_moe` (every expert on
  every token, weighted by a dense (T, E) gate matrix: the computation an MoE layer must equal);
  `dense_route`, `dense_keep`, the course's copies (`course_top_k_route`, ...), `moe_case` and
  the pure checks live in `checks_moe` (grader-side) and are re-exported here.
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

from .checks_moe import (_gen, check_bias, check_capacity, check_load_report, course_capacity,  # noqa: F401
                         course_keep, course_top_k_route, dense_keep, dense_route, moe_case)
from .dist.counting import CommCounter, _SIZED_BY

__all__ = ["dense_route", "dense_keep", "dense_moe", "course_top_k_route", "course_capacity", "CountingExpert",
           "TypedCommCounter", "moe_case", "ep_rank", "ep_one_process", "forbidden"]


# ------------------------------------------------------------------------------- oracles

def dense_moe(x, router_weight, experts, top_k, capacity=None):
    """The MoE layer as one dense computation: sum_e G[:, e] * expert_e(x) over all tokens, with
    G (T, E) the gates of the kept assignments (0 elsewhere). `capacity`: slots per expert."""
    gates, idx = dense_route(x @ router_weight, top_k)
    if capacity is not None:
        gates = gates * dense_keep(idx, router_weight.shape[1], capacity).to(gates.dtype)
    G = torch.zeros(x.shape[0], router_weight.shape[1], dtype=x.dtype).scatter_add(1, idx, gates)
    return sum(G[:, e:e + 1] * experts[e](x) for e in range(len(experts)))


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
            one_process_grads, ep_one_process)   # the first ones live in checks_moe
    return (_moe, _ep) + tuple(f for f in mine if f not in allowed)


# --------------------------------------------------------------------- the test cells' checks
# Each check_* makes the same checks, in the same order and with the same descriptions, in the
# trusted run and in a student's run (docs/GRADING.md rule 2); expected values come from the
# oracles above (not withheld) or, in hidden tests, from `expected=` reference values.

def _grad_of(out, inp, weight, what):
    from .grading import GradingError
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        raise GradingError(f"{what}: the result carries no gradient. Compute it from the inputs with torch "
                           "operations and do not detach it: training needs the gradient to reach the router.")
    (g,) = torch.autograd.grad((out * weight).sum(), inp, allow_unused=True, retain_graph=True)
    return torch.zeros_like(inp) if g is None else g


def check_route(top_k_route, seed, tokens, n_experts, k, label):
    """top_k_route on seeded logits: experts (largest first), gates, and d(sum gates*w)/dlogits."""
    from .grading import expect_close, expect_equal, no_delegation
    g = _gen(seed)
    logits = torch.randn(tokens, n_experts, generator=g, dtype=torch.float64) * 2
    w = torch.randn(tokens, k, generator=g, dtype=torch.float64)
    z = logits.clone().requires_grad_(True)
    with no_delegation("top_k_route", *forbidden()):
        gates, experts = top_k_route(z, k)
    eg, ei = dense_route(logits, k)
    expect_equal(list(torch.as_tensor(experts).shape), [tokens, k], f"{label}: the shape of experts (tokens, k)")
    expect_equal(torch.as_tensor(experts).long().tolist(), ei.tolist(), f"{label}: the experts of each token",
                 hint="the k experts of largest softmax probability, the largest first")
    expect_close(torch.as_tensor(gates).detach(), eg, f"{label}: the gates", rtol=1e-9, atol=1e-12,
                 hint="the chosen probabilities divided by their sum, so each token's k gates add up to 1")
    z2 = logits.clone().requires_grad_(True)
    expect_close(_grad_of(gates, z, w, f"{label}: the gates"), _grad_of(dense_route(z2, k)[0], z2, w, "oracle"),
                 f"{label}: the gradient of sum(gates * w) with respect to the logits", rtol=1e-8, atol=1e-12,
                 hint="the gates must stay a differentiable function of the logits (softmax, gather, divide)")


def check_losses(balancing_loss, router_z_loss, seed, tokens, n_experts, k, label, scale=2.0):
    """Both auxiliary losses on seeded logits: values and gradients against the formulas."""
    from .grading import expect_close, no_delegation
    logits = torch.randn(tokens, n_experts, generator=_gen(seed), dtype=torch.float64) * scale
    idx = dense_route(logits, k)[1]
    f = torch.bincount(idx.reshape(-1), minlength=n_experts).double() / idx.numel()
    z1, z2 = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    with no_delegation("balancing_loss", *forbidden()):
        lb = balancing_loss(z1, idx.clone())
    with no_delegation("router_z_loss", *forbidden()):
        lz = router_z_loss(z2)
    o1, o2 = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    eb = n_experts * (f * torch.softmax(o1, 1).mean(0)).sum()
    ez = (o2.exp().sum(1).log() ** 2).mean()
    expect_close(torch.as_tensor(lb).detach(), eb.detach(), f"{label}: the balancing loss", rtol=1e-9,
                 hint="E * sum_i f_i P_i: f_i the fraction of the T k assignments at expert i, P_i the mean probability")
    expect_close(_grad_of(lb, z1, 1.0, f"{label}: the balancing loss"), _grad_of(eb, o1, 1.0, ""),
                 f"{label}: the gradient of the balancing loss", rtol=1e-8, atol=1e-14,
                 hint="only P carries the gradient; f is a count")
    expect_close(torch.as_tensor(lz).detach(), ez.detach(), f"{label}: the router z-loss", rtol=1e-9,
                 hint="the mean over tokens of logsumexp(logits)^2")
    expect_close(_grad_of(lz, z2, 1.0, f"{label}: the z-loss"), _grad_of(ez, o2, 1.0, ""),
                 f"{label}: the gradient of the z-loss", rtol=1e-8, atol=1e-14)


def check_moe_layer(moe_layer, namespace, seed, tokens, hidden, n_experts, k, label, capacity_factor=None, skew=0.0):
    """moe_layer against the dense oracle: output, gradients (x, router, experts), rows per expert;
    the course's top_k_route, expert_capacity and capacity_keep swapped into `namespace`."""
    from .upstream import swapped
    with swapped(namespace, top_k_route=course_top_k_route, expert_capacity=course_capacity, capacity_keep=course_keep):
        _check_moe_layer(moe_layer, seed, tokens, hidden, n_experts, k, label, capacity_factor, skew)


def _check_moe_layer(moe_layer, seed, tokens, hidden, n_experts, k, label, capacity_factor, skew):
    from .grading import expect_close, expect_equal, no_delegation
    x, w, experts = moe_case(seed, tokens, hidden, n_experts, skew=skew)
    ow = torch.randn(tokens, hidden, generator=_gen(seed + 3), dtype=torch.float64)
    cap = None if capacity_factor is None else course_capacity(tokens, n_experts, k, capacity_factor)
    y1, dx1, dw1, g1 = one_process_grads(lambda a, b, e: dense_moe(a, b, e, k, cap), x, w, experts, ow)
    xi, wi = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    counted = [CountingExpert(copy.deepcopy(e)) for e in experts]
    with no_delegation("moe_layer", *forbidden(course_top_k_route, course_capacity, course_keep)):
        y = moe_layer(xi, wi, counted, k) if capacity_factor is None else moe_layer(xi, wi, counted, k, capacity_factor)
    rows = [c.rows for c in counted]
    expect_close(torch.as_tensor(y).detach(), y1, f"{label}: the output", rtol=1e-9, atol=1e-12,
                 hint="y_t = sum over t's kept choices of gate * expert(x_t); dropped choices add 0, no renormalising")
    expect_equal(rows, expected_rows(x, w, k, n_experts, cap), f"{label}: the rows each expert was called on",
                 hint="call each expert only on the tokens routed to it (and kept): that is the compute an MoE saves")
    params = [p for c in counted for p in c.expert.parameters()]
    _grad_of(y, xi, ow, f"{label}: the output")           # fails with a message when y has no graph
    grads = torch.autograd.grad((y * ow).sum(), [xi, wi] + params, allow_unused=True)
    full = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, [xi, wi] + params)]
    dx, dw, got = full[0], full[1], full[2:]
    expect_close(dx, dx1, f"{label}: the gradient of the input", rtol=1e-8, atol=1e-12)
    expect_close(dw, dw1, f"{label}: the gradient of the router weight", rtol=1e-8, atol=1e-12,
                 hint="the gates carry the gradient to the router: keep them in the graph")
    expect_close(torch.cat([t.reshape(-1) for t in got]), torch.cat([t.reshape(-1) for t in g1]),
                 f"{label}: the gradients of the experts' parameters", rtol=1e-8, atol=1e-12)


def run_ep(ep_moe, namespace, world, ep, seed, tokens, hidden, n_experts, k, skew=0.0):
    """The student's ep_moe on `world` ranks (EP groups of `ep`), the course's router swapped in."""
    from .dist.graded import launch_graded
    from .upstream import swapped
    case = ep_case(seed, world, tokens, hidden, n_experts, skew=skew)
    with swapped(namespace, top_k_route=course_top_k_route):
        res = launch_graded(ep_rank, world, args=(ep_moe, case, k, ep, forbidden(course_top_k_route)))
    return case, res


def check_ep(ep_moe, namespace, world, ep, seed, tokens, hidden, n_experts, k, label, skew=0.0):
    """ep_moe on the ranks against the one-process dense MoE: outputs, input gradients, the router
    gradient summed over ranks, each expert's gradient summed over its replicas; rows per expert."""
    from .grading import expect_close, expect_equal
    case, res = run_ep(ep_moe, namespace, world, ep, seed, tokens, hidden, n_experts, k, skew)
    y, dx, dw, grads = assemble_ep(res, n_experts, 4)
    y1, dx1, dw1, g1 = ep_one_process(case, world, k)
    expect_close(y, y1, f"{label}: the outputs of every rank's tokens", rtol=1e-9, atol=1e-12,
                 hint="each rank returns the MoE output of its own tokens, in their order")
    expect_close(dx, dx1, f"{label}: the input gradients", rtol=1e-8, atol=1e-12,
                 hint="the backward must send the gradients back the way the rows came (an autograd-aware all-to-all)")
    expect_close(dw, dw1, f"{label}: the router gradient summed over the ranks", rtol=1e-8, atol=1e-12)
    expect_close(torch.cat([t.reshape(-1) for t in grads]), torch.cat([t.reshape(-1) for t in g1]),
                 f"{label}: the experts' parameter gradients", rtol=1e-8, atol=1e-12,
                 hint="each expert's gradient comes from the rows of every rank of its EP group")
    xs, w = case[0], case[1]
    for d in range(world // ep):
        members = range(d * ep, (d + 1) * ep)
        expect_equal([n for r in members for n in res[r]["rows"]],
                     expected_rows(torch.cat([xs[r] for r in members]), w, k, n_experts),
                     f"{label}: the rows each expert of EP group {d} was called on",
                     hint="rank r of the group holds experts r E/n .. (r+1) E/n - 1 and runs each on its rows only")


def check_ep_comm(ep_moe, namespace, world, seed, tokens, hidden, n_experts, k, label, skew=0.0):
    """What ep_moe sends, summed over the ranks: token rows only through all-to-all, exactly
    2 T k h e bytes per pass (forward, backward); split sizes as integers, at most 64 E bytes per rank."""
    from .grading import expect_between, expect_close
    case, res = run_ep(ep_moe, namespace, world, world, seed, tokens, hidden, n_experts, k, skew)
    T = sum(x.shape[0] for x in case[0])
    data = 2 * T * k * hidden * 8
    for key, name in (("fwd", "forward"), ("bwd", "backward")):
        a2a = sum(v for r in res for op, v in r[key][0].items() if op in A2A)
        other = sum(v for r in res for op, v in r[key][0].items() if op not in A2A)
        expect_close(other, 0, f"{label}, {name}: floating-point bytes sent by collectives other than all-to-all",
                     hint="no all_gather/all_reduce/broadcast/send of token rows: each row goes only where its expert is")
        expect_close(a2a, data, f"{label}, {name}: all-to-all floating-point bytes summed over the ranks "
                                "(2 T k h e: dispatch + combine)", rtol=0,
                     hint="one row per (token, expert) each way, the rank's own chunk included; no padding, no "
                          "duplicates (exchange the split sizes first so every group has its exact size)")
    ints = max(sum(r["fwd"][1].values()) for r in res)
    expect_between(ints, 1, 64 * n_experts, f"{label}: the largest integer bytes (split sizes) one rank sent in the forward",
                   unit="B", hint="exchange the split sizes as an integer tensor before the rows (all_to_all_single)")


