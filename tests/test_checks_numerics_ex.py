"""solutions_lib.checks_numerics_ex, the test machinery of 07 exercises (issue 28): the hidden
inputs it draws are the ones the cells drew before, and each check accepts the reference answer
and rejects a classic slip with a message that names the case."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from solutions_lib import checks_numerics_ex, numerics
from solutions_lib.grading import GradingError


def _simulate(grads, dtype=torch.float16, **kw):
    # the notebook's signature (dtype=) over the kit's reference (fmt=)
    return numerics.simulate_grad_scaler(grads, fmt="bf16" if dtype is torch.bfloat16 else "fp16", **kw)


def test_scaler_traces_accept_the_reference_and_reject_a_scale_that_never_grows():
    cases = checks_numerics_ex.scaler_streams(7101)[:4]
    real = [checks_numerics_ex.real_scaler_trace(g, kw, extra) for g, kw, extra in cases]
    got = [checks_numerics_ex.scaler_trace(_simulate(g, **kw, **extra)) for g, kw, extra in cases]
    checks_numerics_ex.expect_scaler_traces(cases, got, real)
    g, kw, extra = cases[0]
    frozen = checks_numerics_ex.scaler_trace(_simulate(g, **{**kw, "growth_interval": 10**6}, **extra))
    with pytest.raises(GradingError, match=r"scales of hidden stream 0"):
        checks_numerics_ex.expect_scaler_traces(cases[:1], [frozen], real[:1])


def test_bf16_case_is_traced_as_bf16():
    g, kw, _ = checks_numerics_ex.scaler_streams(7101)[0]
    bf16 = checks_numerics_ex.real_scaler_trace(g, kw, {"dtype": torch.bfloat16})
    assert np.array_equal(bf16["scales"], numerics.torch_grad_scaler_trace(g, **kw, fmt="bf16")["scales"])


def test_overflow_steps_accept_the_oracle_and_reject_an_inclusive_limit():
    traces = checks_numerics_ex.overflow_traces(2612)
    right = [checks_numerics_ex.first_bad_step(l, o, lim) for l, o, lim in traces]
    checks_numerics_ex.expect_overflow_steps(traces, [None if s < 0 else s for s in right])
    at_limit = [(np.array([1.0, 1.0]), np.array([1.0, 65504.0]), 65504.0)]
    checks_numerics_ex.expect_overflow_steps(at_limit, [None])
    with pytest.raises(GradingError, match="first_overflow_step on hidden trace 0"):
        checks_numerics_ex.expect_overflow_steps(at_limit, [1])          # 65504 itself is finite in fp16


def _cell_spike_traces(term_seed=lambda s: s):
    # the draws as the hidden cell wrote them before issue 28
    rng = np.random.default_rng(term_seed(7401))
    spiky = [numerics.simulate_loss_trace(n_steps=int(rng.integers(1200, 2500)), seed=term_seed(7402 + i),
                                          n_spikes=int(rng.integers(4, 8)), noise=float(rng.uniform(0.01, 0.03)),
                                          warmup_steps=int(rng.integers(80, 300)), initial=float(rng.uniform(9.0, 11.5)),
                                          floor=float(rng.uniform(1.2, 5.0)), spike_height=(0.5, 2.5), spike_length=(1, 5))
             for i in range(6)]
    smooth = [numerics.simulate_loss_trace(n_steps=2000, seed=term_seed(7410 + i), n_spikes=0, noise=0.02,
                                           warmup_steps=int(rng.integers(80, 400)), floor=float(rng.uniform(1.2, 5.0)))[0]
              for i in range(3)]
    noisy = numerics.simulate_loss_trace(n_steps=1500, seed=term_seed(7420), n_spikes=5, noise=0.06, spike_height=(1.0, 2.0),
                                         floor=2.0)
    return spiky, smooth, noisy


def test_spike_traces_are_the_ones_the_cell_drew():
    spiky, smooth, noisy = checks_numerics_ex.spike_traces(7401, [7402 + i for i in range(6)], [7410 + i for i in range(3)], 7420)
    old_spiky, old_smooth, old_noisy = _cell_spike_traces()
    for (l, sp), (ol, osp) in zip(spiky, old_spiky, strict=True):
        assert np.array_equal(l, ol) and sp == osp
    for l, ol in zip(smooth, old_smooth, strict=True):
        assert np.array_equal(l, ol)
    assert np.array_equal(noisy[0], old_noisy[0]) and noisy[1] == old_noisy[1]
    with_inf, close = checks_numerics_ex.spike_edge_traces(smooth)
    assert len(with_inf) == 600 and np.isinf(with_inf[400]) and np.isfinite(np.delete(with_inf, 400)).all()
    assert np.allclose(close[900:905], 3.5 * smooth[1][900:905]) and close[915] == pytest.approx(1.5 * smooth[1][915])
    assert np.array_equal(np.delete(close, [900, 901, 902, 903, 904, 915]), np.delete(smooth[1], [900, 901, 902, 903, 904, 915]))


def test_spike_verdicts_accept_the_reference_and_reject_a_silent_detector():
    spiky, smooth, (noisy, noisy_spikes) = checks_numerics_ex.spike_traces(
        7401, [7402 + i for i in range(6)], [7410 + i for i in range(3)], 7420)
    with_inf, close = checks_numerics_ex.spike_edge_traces(smooth)
    detect = numerics.detect_loss_spikes
    got = ([detect(l) for l, _ in spiky], [detect(l) for l in smooth],
           numerics.spike_detection_scores(detect(noisy, window=30, factor=1.6), noisy_spikes), detect(with_inf), detect(close))
    checks_numerics_ex.expect_spike_verdicts(spiky, *got)
    with pytest.raises(GradingError, match=r"precision on 6 hidden traces"):
        checks_numerics_ex.expect_spike_verdicts(spiky, [[] for _ in spiky], *got[1:])
    with pytest.raises(GradingError, match=r"flags for a 1.5x spike ten steps after"):
        checks_numerics_ex.expect_spike_verdicts(spiky, *got[:4], [900, 901, 902, 903, 904])



def test_what_it_takes_from_the_kit_is_the_kit_own():
    from solutions_lib import checks_cases, checks_numerics
    for name in checks_numerics_ex.__all__:
        obj = getattr(checks_numerics_ex, name)
        if getattr(obj, "__module__", "") == "solutions_lib.checks_numerics":
            assert obj is getattr(checks_numerics, name), name
        elif getattr(obj, "__module__", "") == "solutions_lib.checks_cases":
            assert obj is getattr(checks_cases, name), name
    assert checks_numerics_ex.BANNED is checks_numerics.BANNED
