"""Compute against communication, measured (solutions_lib.dist.comm_bound), EXT-COMMBOUND.

Oracles: the timed steps must leave the gradients of one process (plain torch autograd on the
same data: the mean over ranks for DP, the unsharded MLP for TP) and issue exactly the counted
all-reduces of the stated sizes; the fits must recover the parameters of synthetic data made
from an exact model; the predicted crossover must equal the ring all-reduce of `comms` priced
against 6 P FLOPs per token. No timing is asserted beyond "finite and positive": trends are
printed by `python -m solutions_lib bench parallel`.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from solutions_lib import comms as C
from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist import comm_bound as CB

pytestmark = pytest.mark.xdist_group("dist_comm_bound")


def _dp_rank(rank, world, hidden, tokens, repeats):
    net = CB.dp_layer(hidden, seed=3, dtype=torch.float64)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(10 + rank), dtype=torch.float64)
    with CommCounter() as comm:
        c, m, flat = CB.time_dp_step(net, x, repeats)
    return c, m, flat, comm.calls["all_reduce"], comm.bytes["all_reduce"]


@pytest.mark.parametrize("world", [2, 3])
def test_time_dp_step_averages_like_one_process_and_counts(world):
    hidden, tokens, repeats = 8, 5, 2
    res = launch(_dp_rank, world, args=(hidden, tokens, repeats))
    grads = []
    for r in range(world):                       # one process: each rank's gradient, then the mean
        net = CB.dp_layer(hidden, seed=3, dtype=torch.float64)
        x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(10 + r), dtype=torch.float64)
        net(x).square().mean().backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
    want = torch.stack(grads).mean(0)
    P = 8 * hidden * hidden + 5 * hidden
    for c, m, flat, calls, nbytes in res:
        assert c > 0 and m > 0 and math.isfinite(c) and math.isfinite(m)
        assert torch.allclose(flat, want, rtol=0, atol=1e-12)
        assert calls == repeats + 1 and nbytes == (repeats + 1) * P * 8


def _tp_rank(rank, world, hidden, tokens, repeats):
    w1, w2, _, _ = CB.tp_shards(hidden, rank, world, seed=5, dtype=torch.float64)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(6), dtype=torch.float64).requires_grad_(True)
    with CommCounter() as comm:
        c, m, grads = CB.time_tp_mlp(w1, w2, x, repeats)
    return c, m, grads, comm.calls["all_reduce"], comm.bytes["all_reduce"]


@pytest.mark.parametrize("world", [2, 4])
def test_time_tp_mlp_matches_the_unsharded_mlp_and_counts(world):
    hidden, tokens, repeats = 6, 7, 2
    res = launch(_tp_rank, world, args=(hidden, tokens, repeats))
    _, _, W1, W2 = CB.tp_shards(hidden, 0, world, seed=5, dtype=torch.float64)
    W1, W2 = W1.clone().requires_grad_(True), W2.clone().requires_grad_(True)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(6), dtype=torch.float64).requires_grad_(True)
    (F.gelu(x @ W1.T) @ W2.T).square().mean().backward()
    k = 4 * hidden // world
    for r, (c, m, grads, calls, nbytes) in enumerate(res):
        assert c > 0 and m > 0
        assert torch.allclose(grads["w1"], W1.grad[r * k:(r + 1) * k], rtol=0, atol=1e-12)
        assert torch.allclose(grads["w2"], W2.grad[:, r * k:(r + 1) * k], rtol=0, atol=1e-12)
        assert torch.allclose(grads["x"], x.grad, rtol=0, atol=1e-12)
        assert calls == 2 * (repeats + 1) and nbytes == 2 * (repeats + 1) * tokens * hidden * 8


def test_dp_crossover_recovers_an_exact_line():
    T = np.array([4, 16, 64, 256, 1024.0])
    c0, c1, comm = 2e-4, 5e-5, 3e-3
    noise = np.array([1.0, 0.5, 2.0, 0.8, 1.2])
    fit = CB.dp_crossover_from(T, c0 + c1 * T, comm * noise)
    assert fit["overhead_s"] == pytest.approx(c0) and fit["per_token_s"] == pytest.approx(c1)
    assert fit["comm_s"] == pytest.approx(comm)                       # the median, not the mean
    assert fit["crossover_tokens"] == pytest.approx((comm - c0) / c1)
    assert CB.dp_crossover_from(T, 1e-2 + c1 * T, [comm] * 5)["crossover_tokens"] == 0.0   # overhead > comm


def test_tp_crossover_solves_the_fitted_models():
    h = np.array([64, 128, 256, 512.0])
    a, b0, b1 = 3e-9, 2e-4, 4e-6
    fit = CB.tp_crossover_from(h, a * h ** 2, b0 + b1 * h)
    assert fit["compute_per_h2_s"] == pytest.approx(a)
    assert fit["comm_intercept_s"] == pytest.approx(b0) and fit["comm_per_width_s"] == pytest.approx(b1)
    hs = fit["crossover_width"]
    assert a * hs * hs == pytest.approx(b0 + b1 * hs)
    assert CB.tp_crossover_from(h, a * h ** 2, 1e-9 + 0 * h)["crossover_width"] == pytest.approx(math.sqrt(1e-9 / a))


@pytest.mark.parametrize("call", [
    lambda: CB.dp_crossover_from([4, 8], [1e-3, 2e-3], [1e-3]),
    lambda: CB.dp_crossover_from([4, 4], [1e-3, 2e-3], [1e-3, 1e-3]),
    lambda: CB.dp_crossover_from([4, 8], [1e-3, -2e-3], [1e-3, 1e-3]),
    lambda: CB.dp_crossover_from([4, 8], [2e-3, 1e-3], [1e-3, 1e-3]),
    lambda: CB.dp_crossover_from([4], [1e-3], [1e-3]),
    lambda: CB.tp_crossover_from([64, 128], [1e-3, float("nan")], [1e-3, 1e-3]),
    lambda: CB.tp_crossover_from([64, 64], [1e-3, 2e-3], [1e-3, 1e-3]),
    lambda: CB.predicted_dp_crossover(0, 2, 1e-5, 1e9, 1e10),
    lambda: CB.predicted_dp_crossover(100, 2, -1e-5, 1e9, 1e10),
    lambda: CB.predicted_dp_crossover(100, 2, 1e-5, 0, 1e10),
    lambda: CB.predicted_dp_crossover(100, True, 1e-5, 1e9, 1e10),
    lambda: CB.time_dp_step(None, None, 0),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("P,n,alpha,B,Fl,e", [(525_568, 2, 3e-5, 1.5e9, 4e10, 4), (7e9, 64, 5e-6, 25e9, 312e12, 2)])
def test_predicted_dp_crossover_prices_the_ring_against_6P_flops(P, n, alpha, B, Fl, e):
    P = int(P)
    Ts = CB.predicted_dp_crossover(P, n, alpha, B, Fl, e)
    assert 6 * P * Ts / Fl == pytest.approx(C.ring_allreduce_time(n, P * e, alpha, B))
    assert CB.predicted_dp_crossover(P, n, 0.0, B, Fl, e) == pytest.approx((n - 1) / n * e * Fl / (3 * B))
    assert CB.predicted_dp_crossover(P, 1, alpha, B, Fl, e) == 0.0


def test_sweeps_return_one_finite_pair_per_point():
    dp = CB.measure_dp_sweep(tokens=(2, 8), hidden=16, repeats=1)
    tp = CB.measure_tp_sweep(widths=(8, 16), tokens=4, repeats=1)
    assert dp["tokens"] == [2, 8] and tp["widths"] == [8, 16]
    for d in (dp, tp):
        assert len(d["compute_s"]) == len(d["comm_s"]) == 2
        assert all(v > 0 and math.isfinite(v) for v in d["compute_s"] + d["comm_s"])


# ---------------------------------------------------------------- the scripted clock of the notebook's tests

from solutions_lib.dist.probes_comm_bound import DP_SCRIPT, TP_SCRIPT, ScriptedClock, expected, scaled  # noqa: E402


def _issue_harness(net, x, repeats):
    """The harness of issue 24: no barriers, a mean, the warm-up step timed."""
    import time
    import torch.distributed as dist
    compute, comm, flat = [], [], None
    for _ in range(repeats + 1):
        net.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        net(x).square().mean().backward()
        t1 = time.perf_counter()
        flat = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
        t2 = time.perf_counter()
        dist.all_reduce(flat)
        t3 = time.perf_counter()
        flat /= dist.get_world_size()
        compute.append(t1 - t0)
        comm.append(t3 - t2)
    return float(np.mean(compute)), float(np.mean(comm)), flat


def _scripted_dp_rank(rank, world, which):
    fn = CB.time_dp_step if which == "course" else _issue_harness
    net = CB.dp_layer(8, dtype=torch.float64)
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(rank), dtype=torch.float64)
    with CommCounter() as comm, ScriptedClock(DP_SCRIPT, fn=fn).dp(net) as clock:
        c, m, _ = fn(net, x, DP_SCRIPT["repeats"])
    return c, m, clock.report(comm)


def _scripted_tp_rank(rank, world):
    w1, w2, _, _ = CB.tp_shards(8, rank, world, dtype=torch.float64)
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    with CommCounter() as comm, ScriptedClock(TP_SCRIPT, fn=CB.time_tp_mlp).tp(x) as clock:
        c, m, _ = CB.time_tp_mlp(w1, w2, x, TP_SCRIPT["repeats"])
    return c, m, clock.report(comm)


def test_scripted_clock_gives_the_script_medians_and_catches_the_issue_harness():
    want, r = expected(DP_SCRIPT), DP_SCRIPT["repeats"]
    assert expected(scaled(DP_SCRIPT, 2.0))["compute_s"] == pytest.approx(2 * want["compute_s"])
    # the script separates the right answer from each slip
    assert len({want["compute_s"], want["compute_mean"], want["compute_with_warmup"]}) == 3
    assert len({want["comm_s"], want["comm_mean"], want["comm_with_warmup"]}) == 3
    for c, m, seen in launch(_scripted_dp_rank, 2, args=("course",)):
        assert c == pytest.approx(want["compute_s"], rel=1e-9) and m == pytest.approx(want["comm_s"], rel=1e-9)
        assert seen == {"forwards": r + 1, "allreduces": r + 1, "barriers": 2 * (r + 1)}
    for c, m, seen in launch(_scripted_dp_rank, 2, args=("issue",)):
        assert seen["barriers"] == 0
        assert c != pytest.approx(want["compute_s"], rel=1e-3) and m != pytest.approx(want["comm_s"], rel=1e-3)
    want = expected(TP_SCRIPT)
    for c, m, seen in launch(_scripted_tp_rank, 2):
        assert c == pytest.approx(want["compute_s"], rel=1e-9) and m == pytest.approx(want["comm_s"], rel=1e-9)
        assert seen == {"forwards": r + 1, "backwards": r + 1, "allreduces": 2 * (r + 1), "barriers": 4 * (r + 1)}
