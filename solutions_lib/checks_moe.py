"""Checks of 12 exercises 1 (mixture of experts) that only call the student's code and compare:
oracles written the long way, the course's copies of the router and the capacity rule, seeded
cases. A kit module, not withheld; its cells run grader-side (docs/GRADING.md rule 10). What
must run in the student's process (gradients through the router, counting experts and
collectives, the expert-parallel ranks) is in `probes_moe`, which re-exports all of this.

* `dense_route` (softmax, sort, renormalise) and `dense_keep` (a loop over the assignments in
  GShard's priority order): oracles independent of the references.
* `course_top_k_route`, `course_capacity`, `course_keep`: the course's copies, swapped in for
  the student's own when a later answer is graded (one slip, one cell).
* `moe_case`: seeded x, router weight and small MLP experts.
* `check_capacity`, `check_bias`, `check_load_report`: the cells' checks. Each runs the
  student's function under `guard(task)`: the cell passes
  `guard=lambda task: no_delegation(task, *checks_moe.forbidden())` (in a grader-side cell only
  the cell's own `no_delegation` watches the student's kernel); without it the guard is made
  here, which sees the calls only when this runs in the student's process.
"""
from __future__ import annotations

import torch

__all__ = ["check_bias", "check_capacity", "check_load_report", "course_capacity", "course_keep",
           "course_top_k_route", "dense_keep", "dense_route", "forbidden", "moe_case"]


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
    order = experts.t().reshape(-1)
    onehot = torch.nn.functional.one_hot(order.long(), n_experts)
    place = (onehot.cumsum(0) * onehot).sum(1) - 1
    return (place < capacity).reshape(experts.shape[1], experts.shape[0]).t()


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


def forbidden(*allowed):
    """What an answer graded with these checks may not call: the references (`moe`,
    `dist.expert_parallel`) and this module's oracles and copies, except those in `allowed`."""
    from . import moe as _moe
    from .dist import expert_parallel as _ep
    mine = (dense_route, dense_keep, course_top_k_route, course_capacity, course_keep)
    return (_moe, _ep) + tuple(f for f in mine if f not in allowed)


def _guard(guard):
    """`guard` (task -> context manager), or `no_delegation(task, *forbidden())` made here."""
    if guard is not None:
        return guard
    from .grading import no_delegation
    return lambda task: no_delegation(task, *forbidden())


# --------------------------------------------------------------------- the test cells' checks

def _gen(seed):
    return torch.Generator().manual_seed(int(seed))


def check_capacity(expert_capacity, capacity_keep, seed, tokens, n_experts, k, capacities, label, guard=None):
    """capacity_keep on a seeded routing against the loop oracle, for each capacity (run under
    `guard(task)`, see `_guard`)."""
    from .grading import expect_equal
    guard = _guard(guard)
    idx = dense_route(torch.randn(tokens, n_experts, generator=_gen(seed), dtype=torch.float64) * 2, k)[1]
    if seed % 2:
        idx[: tokens // 2, 0] = 0           # a crowded expert: drops among first choices
    for c in capacities:
        with guard("capacity_keep"):
            keep = capacity_keep(idx.clone(), n_experts, c)
        expect_equal(torch.as_tensor(keep).bool().tolist(), dense_keep(idx, n_experts, c).tolist(),
                     f"{label}: the kept assignments with capacity {c}",
                     hint="first choices of all tokens in token order, then the second choices, ...; an expert "
                          "keeps its first `capacity` assignments in that order")


def check_bias(biased_route, update_bias, seed, tokens, n_experts, k, label, guard=None):
    """biased_route (choice by probability + bias, gates unbiased) and update_bias (sign rule),
    each run under `guard(task)` (see `_guard`)."""
    from .grading import expect_close, expect_equal
    guard = _guard(guard)
    g = _gen(seed)
    logits = torch.randn(tokens, n_experts, generator=g, dtype=torch.float64)
    bias = torch.randn(n_experts, generator=g, dtype=torch.float64) * 0.3
    p = torch.softmax(logits, 1)
    ei = torch.argsort(p + bias, dim=1, descending=True, stable=True)[:, :k]
    top = p.gather(1, ei)
    with guard("biased_route"):
        gates, experts = biased_route(logits.clone(), bias.clone(), k)
    expect_equal(torch.as_tensor(experts).long().tolist(), ei.tolist(), f"{label}: the experts chosen with the bias",
                 hint="choose by probability + bias, the largest first")
    expect_close(torch.as_tensor(gates).detach(), top / top.sum(1, keepdim=True), f"{label}: the gates with the bias",
                 rtol=1e-9, hint="the bias decides the choice only: gates are the chosen unbiased probabilities, renormalised")
    idx = ei.clone()
    idx[0] = torch.arange(k)                        # make some loads meet the mean exactly where possible
    load = torch.bincount(idx.reshape(-1), minlength=n_experts).double()
    expected = bias + 0.01 * torch.sign(idx.numel() / n_experts - load)
    before = bias.clone()
    with guard("update_bias"):
        new = update_bias(bias, idx.clone(), n_experts, 0.01)
    expect_close(torch.as_tensor(new), expected, f"{label}: the updated bias", rtol=1e-12, atol=1e-15,
                 hint="b_i + rate * sign(mean load - load_i): underloaded experts go up, overloaded down, at the mean none")
    expect_close(bias, before, f"{label}: the bias passed in, after update_bias", rtol=0, atol=0,
                 hint="return a new tensor; leave the argument as it was")


def check_load_report(load_report, experts, n_experts, n_ranks, seconds_per_row, label, expected=None, guard=None):
    """load_report against the counts computed here (or `expected`, a reference result), run
    under `guard(task)` (see `_guard`)."""
    from .grading import expect_close, expect_equal
    with _guard(guard)("load_report"):
        got = load_report(experts.clone(), n_experts, n_ranks, seconds_per_row)
    keys = ("tokens_per_expert", "expert_imbalance", "tokens_per_rank", "rank_imbalance", "step_time",
            "balanced_step_time")
    missing = [key for key in keys if not isinstance(got, dict) or key not in got]
    expect_equal(missing, [], f"{label}: keys missing from the report")
    if expected is None:
        per_e = torch.bincount(experts.reshape(-1), minlength=n_experts).tolist()
        m = n_experts // n_ranks
        per_r = [sum(per_e[r * m:(r + 1) * m]) for r in range(n_ranks)]
        expected = {"tokens_per_expert": per_e, "expert_imbalance": max(per_e) * n_experts / sum(per_e),
                    "tokens_per_rank": per_r, "rank_imbalance": max(per_r) * n_ranks / sum(per_r),
                    "step_time": max(per_r) * seconds_per_row, "balanced_step_time": sum(per_r) / n_ranks * seconds_per_row}
    hints = {"tokens_per_rank": "rank r holds the contiguous block of experts r E/n .. (r+1) E/n - 1",
             "expert_imbalance": "max over experts / mean over all E experts (empty ones count in the mean)",
             "rank_imbalance": "max over ranks / mean over ranks",
             "step_time": "every rank waits for the most loaded one: max rows per rank x seconds per row",
             "balanced_step_time": "the same rows spread evenly: mean rows per rank x seconds per row"}
    for key in keys:
        expect_close(got[key], expected[key], f"{label}: {key}", rtol=1e-9, hint=hints.get(key, ""))
