"""The kit checks of 07 exercises (solutions_lib.checks_numerics) and 07 exercises 2
(solutions_lib.probes_fa2), issue 28: each accepts a correct answer written here and rejects the
classic slip with a message that names what went wrong."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from solutions_lib import checks_numerics as cn, probes_fa2 as pf
from solutions_lib.grading import GradingError


def _task(seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 16, generator=gen)
    y = x @ torch.randn(16, 4, generator=gen) / 4.0
    torch.manual_seed(seed)
    return x, y, torch.nn.Linear(16, 4)


def test_precision_run_check_accepts_the_protocol_and_rejects_no_warmup():
    losses, outs = cn.oracle_run(_task, "fp16", 0.05, steps=20, warmup=10, seed=1)
    cn.check_precision_run({"loss": losses, "max_abs_out": outs}, _task, "fp16", 0.05, 20, 10, 1, "test run")
    flat_l, flat_o = cn.oracle_run(_task, "fp16", 0.05, steps=20, warmup=1, seed=1)     # no warm-up
    with pytest.raises(GradingError, match=r"loss of the first 5 steps \(test run\)"):
        cn.check_precision_run({"loss": flat_l, "max_abs_out": flat_o}, _task, "fp16", 0.05, 20, 10, 1, "test run")


def test_first_bad_step_and_overflow_traces():
    assert cn.first_bad_step([1.0, 2.0], [5.0, 6.0], limit=5.5) == 1
    assert cn.first_bad_step([1.0, math.nan]) == 1 and cn.first_bad_step([1.0, 2.0], [1.0, 65504.0]) == -1
    traces = cn.overflow_traces(2612)
    assert len(traces) == 8 and [t[2] for t in traces[:4]] == [65504.0, 65504.0, 1e4, 3e4]
    assert all(cn.first_bad_step(l, o, lim) >= 0 for l, o, lim in traces[:3])
    assert cn.as_step(None) == -1 and cn.as_step(np.int64(3)) == 3


def _stats(blocks):
    m = l = None
    for b in blocks:
        bm = b.amax(-1)
        m_new = bm if m is None else torch.maximum(m, bm)
        safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        l = (0 if l is None else l * torch.exp(m - safe)) + torch.exp(b - safe[..., None]).sum(-1)
        m = m_new
    return m, l


def _two_pass(blocks):
    cols = torch.cat(list(blocks), -1)                 # holds every block: not one pass
    return cols.amax(-1), torch.exp(cols - cols.amax(-1, keepdim=True)).sum(-1)


def test_one_pass_stats_accepts_one_pass_and_rejects_a_copy_of_the_rows():
    x = torch.randn(2, 3, 17, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    m, l = cn.one_pass_stats(_stats, x, 2, "test")
    em, el, _ = cn.softmax_oracle(x)
    assert torch.equal(m, em) and torch.allclose(l, el)
    with pytest.raises(GradingError, match="blocks online_softmax_stats still held"):
        cn.one_pass_stats(_two_pass, x, 2, "test")
    xs, widths = cn.softmax_inputs(torch.Generator().manual_seed(7201))
    assert len(xs) == len(widths) == 7


def test_planted_scores_and_benchmark_configs():
    spiky = [(None, [(10, 3), (50, 2)])]
    assert cn.planted_scores(spiky, [[10, 11, 51]]) == (1.0, 1.0)
    assert cn.planted_scores(spiky, [[10, 30]]) == (0.5, 0.5)
    for b, s, d, h, e in cn.benchmark_configs(7301):
        assert d % h == 0 and b >= 1 and s >= 1
    assert cn.crossover_pairs(7302)[:4] == [(1536, 24), (64, 1), (96, 96), (3072, 3)]


def _naive_forward(q, k, v, bq, bk, causal=False):
    s = pf._scores(q, k, causal)                       # one full score matrix per head
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def test_fa2_probe_rejects_a_full_score_matrix():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 1, 32, 4, generator=g, dtype=torch.float64) for _ in range(3))
    with pytest.raises(GradingError, match="softmax/logsumexp/SDPA calls inside fa2_forward"):
        pf.run_fa2_forward(_naive_forward, q, k, v, 8, 8, True, "test")
    known = pf.KnownFA2()
    o, L = known.forward(q, k, v, 8, 8, causal=True)
    eo, el = pf.attention_oracle(q, k, v, True)
    assert torch.allclose(o, eo) and torch.allclose(L, el)
    dq, dk, dv = known.backward(q, k, v, o, L, torch.ones_like(o), 8, 8, causal=True)
    for a, b in zip((dq, dk, dv), pf.autograd_grads(q, k, v, torch.ones_like(o), True)):
        assert torch.allclose(a, b)


def test_flash_case_accepts_a_function_that_saves_o_and_l_and_rejects_one_that_saves_p():
    known = pf.KnownFA2()

    class Good(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal=False, bq=4, bk=4):
            o, L = known.forward(q, k, v, bq, bk, causal=causal)
            ctx.save_for_backward(q, k, v, o, L)
            ctx.settings = (bq, bk, causal)
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, L = ctx.saved_tensors
            bq, bk, causal = ctx.settings
            return (*known.backward(q, k, v, o, L, do, bq, bk, causal=causal), None, None, None)

    class SavesP(Good):
        @staticmethod
        def forward(ctx, q, k, v, causal=False, bq=4, bk=4):
            o, L = known.forward(q, k, v, bq, bk, causal=causal)
            p = torch.exp(pf._scores(q, k, causal) - L[..., None])
            ctx.save_for_backward(q, k, v, o, L, p)
            ctx.settings = (bq, bk, causal)
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, L, _ = ctx.saved_tensors
            bq, bk, causal = ctx.settings
            return (*known.backward(q, k, v, o, L, do, bq, bk, causal=causal), None, None, None)

    pf.check_flash_case(Good, known, (1, 2, 7, 9, 3, 4), (4, 5), True, seed=21)
    pf.check_gradcheck(Good, (1, 1, 5, 5, 3, 3), (True, 2, 3), seed=22, label="test")
    with pytest.raises(GradingError, match="bytes saved for the backward"):
        pf.check_flash_case(SavesP, known, (1, 2, 7, 9, 3, 4), (4, 5), True, seed=21)
