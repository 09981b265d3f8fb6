"""Global-norm gradient clipping in ShardedOptimizer (max_norm, issue 27 depth).

Oracle: one process in float64 that accumulates loss / N over the N micro-batches of a step,
calls torch.nn.utils.clip_grad_norm_(params, max_norm) and steps the wrapped optimizer itself.
The sharded run (2 gloo ranks, float64) must give the same parameters to 1e-12 and report, in
`last_grad_norm`, the norm clip_grad_norm_ returned; the norm costs one all-reduce of one scalar.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist.zero import ShardedOptimizer

pytestmark = pytest.mark.xdist_group("dist_sharded_optimizer")

STEPS = 4
DIMS = [6, 16, 16, 2]
WORLD = 2
OPTS = {"adamw": (torch.optim.AdamW, dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, foreach=False)),
        "sgd": (torch.optim.SGD, dict(lr=5e-2, momentum=0.9, foreach=False))}


def make_model(seed=0):
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(DIMS, DIMS[1:])):
        layers += [nn.Linear(a, b)] + ([nn.Tanh()] if i < len(DIMS) - 2 else [])
    return nn.Sequential(*layers).double()


def batches():
    g = torch.Generator().manual_seed(5)
    return [[(torch.randn(5, DIMS[0], generator=g, dtype=torch.float64) * 3,
              torch.randn(5, DIMS[-1], generator=g, dtype=torch.float64) * 3) for _ in range(WORLD)]
            for _ in range(STEPS)]


def loss_fn(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def reference(name, max_norm):
    cls, kw = OPTS[name]
    model = make_model()
    opt = cls(model.parameters(), **kw)
    norms = []
    for step in batches():
        opt.zero_grad()
        for b in step:
            (loss_fn(model, b) / WORLD).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)))
        opt.step()
    return [p.detach().clone() for p in model.parameters()], norms


def _rank(rank, world_size, runs):
    out = {}
    for name, stage, partition, max_norm in runs:
        cls, kw = OPTS[name]
        model = make_model()
        opt = ShardedOptimizer(model.parameters(), cls, stage, partition=partition, max_norm=max_norm, **kw)
        norms, reduces = [], []
        for step in batches():
            opt.zero_grad()
            loss_fn(model, step[rank]).backward()
            with CommCounter() as c:
                opt.step()
            norms.append(float(opt.last_grad_norm))
            reduces.append(dict(c.calls).get("all_reduce", 0))
        out[(name, stage, partition, max_norm)] = ([p.detach().clone() for p in model.parameters()], norms, reduces)
    return out


RUNS = [("adamw", 1, "flat", 0.05), ("adamw", 2, "flat", 0.05), ("adamw", 1, "params", 0.05),
        ("sgd", 2, "params", 0.05), ("adamw", 1, "flat", 1e3)]


def test_clipped_step_equals_clip_grad_norm_on_one_process():
    out = launch(_rank, WORLD, args=(RUNS,), threads_per_rank=1, timeout=240)
    clipped = False
    for run in RUNS:
        want, want_norms = reference(run[0], run[3])
        clipped = clipped or max(want_norms) > run[3]
        for r in out:
            params, norms, reduces = r[run]
            for a, b in zip(params, want):
                torch.testing.assert_close(a, b, rtol=0, atol=1e-12, msg=lambda m: f"{run}: {m}")
            assert norms == pytest.approx(want_norms, rel=1e-12, abs=0), (run, norms, want_norms)
            assert reduces == [1] * STEPS, f"{run}: the norm takes one all-reduce per step, got {reduces}"
    assert clipped, "the test must clip: the norms all stayed below max_norm"


def _default_rank(rank, world_size):
    model = make_model()
    opt = ShardedOptimizer(model.parameters(), torch.optim.SGD, 1, lr=0.1)
    loss_fn(model, batches()[0][rank]).backward()
    with CommCounter() as c:
        opt.step()
    return opt.max_norm, opt.last_grad_norm, dict(c.calls).get("all_reduce", 0)


def test_default_is_no_clipping_and_no_extra_collective():
    for max_norm, norm, reduces in launch(_default_rank, WORLD, threads_per_rank=1):
        assert max_norm is None and norm is None and reduces == 0


def _bad(rank, world_size):
    msgs = []
    for bad in (0, -1.0, float("nan"), True, "1"):
        try:
            ShardedOptimizer(make_model().parameters(), torch.optim.SGD, 1, lr=0.1, max_norm=bad)
            msgs.append(None)
        except ValueError as e:
            msgs.append(str(e))
    return msgs


def test_bad_max_norm_is_a_value_error():
    for msgs in launch(_bad, WORLD, threads_per_rank=1):
        assert all(m and "max_norm" in m for m in msgs), msgs
