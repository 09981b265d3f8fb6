"""Correctness of data-parallel training: sampler epochs, sync checks, async/local SGD, faults."""
import math

import numpy as np
import pytest
import torch
import torch.distributed as dist

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist import async_sgd as asg
from solutions_lib.dist import faults, sampling, sync

# ---------------------------------------------------------------- CH26-02 sampler epochs


def _manual_order(n, W, rank, epoch, seed):
    """DistributedSampler's documented rule, written out: randperm(seed + epoch), padded, strided."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    total = math.ceil(n / W) * W
    perm += perm[:total - n]
    return perm[rank:total:W]


@pytest.mark.parametrize("n,W", [(10, 2), (11, 3)])
def test_sampler_orders_follow_distributed_sampler(n, W):
    with_epoch = sampling.sampler_orders(n, W, 3, set_epoch=True, seed=5)
    without = sampling.sampler_orders(n, W, 3, set_epoch=False, seed=5)
    for e in range(3):
        for r in range(W):
            assert with_epoch[e][r] == _manual_order(n, W, r, e, 5)
            assert without[e][r] == _manual_order(n, W, r, 0, 5)  # epoch 0's order, forever
        assert set(sum(with_epoch[e], [])) == set(range(n))
    assert with_epoch[1] != with_epoch[0]


def _gloo_training(rank, world_size, set_epoch, epochs, seed):
    """The same experiment as dp_training_losses, with real ranks and a real all_reduce."""
    from torch.utils.data import DistributedSampler
    x, y = sampling._regression_data(192, 8, seed)
    sampler = DistributedSampler(range(192), num_replicas=world_size, rank=rank, seed=seed, drop_last=True)
    w, losses = torch.zeros(8), []
    for e in range(epochs):
        if set_epoch:
            sampler.set_epoch(e)
        idx = list(sampler)
        for s in range(len(idx) // 4):
            rows = torch.tensor(idx[4 * s:4 * s + 4])
            err = x[rows] @ w - y[rows]
            loss = torch.tensor([float((err ** 2).mean()) / 2])
            grad = x[rows].T @ err / 4
            dist.all_reduce(grad)
            dist.all_reduce(loss)
            w -= 0.05 * grad / world_size
            losses.append(float(loss) / world_size)
    return losses


@pytest.mark.parametrize("set_epoch", [True, False])
def test_simulated_ranks_match_a_gloo_run(set_epoch):
    sim = sampling.dp_training_losses(set_epoch, epochs=3, seed=3)
    real = launch(_gloo_training, 2, args=(set_epoch, 3, 3))[0]
    np.testing.assert_allclose(sim.ravel(), real, rtol=1e-5)


def test_detector_separates_healthy_and_buggy_runs():
    sep = sampling.detector_separation(range(8))
    assert max(sep["healthy"]) < 0.6 < min(sep["buggy"]), sep
    for s in range(8, 12):  # rank 0's own loss, as a loop that logs without reducing
        assert not sampling.detect_missing_set_epoch(sampling.dp_training_losses(True, seed=s, rank=0))
        assert sampling.detect_missing_set_epoch(sampling.dp_training_losses(False, seed=s, rank=0))


def test_detector_accepts_a_flat_curve_and_rejects_bad_input():
    buggy = sampling.dp_training_losses(False, seed=1)
    steps = buggy.shape[1]
    assert sampling.epoch_repeat_score(buggy.ravel(), steps) == pytest.approx(sampling.epoch_repeat_score(buggy))
    with pytest.raises(ValueError):
        sampling.epoch_repeat_score(buggy.ravel())  # no steps_per_epoch
    with pytest.raises(ValueError):
        sampling.epoch_repeat_score(buggy[:1])  # one epoch
    with pytest.raises(ValueError):
        sampling.detect_missing_set_epoch(buggy, threshold=1.5)
    with pytest.raises(ValueError):
        sampling.sampler_orders(0, 2, 1)
    with pytest.raises(ValueError):
        sampling.dp_training_losses(True, rank=3)


# ---------------------------------------------------------------- CH26-03 sync checks


def _model(seed=0, hidden=16):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))


@pytest.mark.parametrize("perturb", [lambda m: sync.swap_elements(m[0].weight, 0, 1),
                                     lambda m: sync.shift_keep_sum(m[0].weight, 1e-3, 2, 5)])
def test_sum_preserving_perturbations_fool_only_the_weak_fingerprint(perturb):
    a, b = _model(), _model()
    perturb(b)
    assert math.isclose(sync.weak_fingerprint(a), sync.weak_fingerprint(b), rel_tol=1e-6)
    assert not torch.equal(sync.hash_fingerprint(a), sync.hash_fingerprint(b))
    assert not torch.allclose(sync.projection_fingerprint(a), sync.projection_fingerprint(b), rtol=1e-12, atol=0)
    assert torch.equal(sync.hash_fingerprint(a), sync.hash_fingerprint(_model()))


def test_fingerprints_are_small_and_the_weak_one_is_the_sum():
    m = _model(hidden=64)
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()]).double()
    assert sync.weak_fingerprint(m) == pytest.approx(float(flat.sum()), rel=1e-12)
    assert sync.hash_fingerprint(m).shape == (4,) and sync.hash_fingerprint(m).dtype == torch.int64
    proj = sync.projection_fingerprint(m, k=3, seed=7)
    r = torch.randn(3, flat.numel(), generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    torch.testing.assert_close(proj, r @ flat)
    with pytest.raises(ValueError):
        sync.fingerprint(m, "md5")
    with pytest.raises(ValueError):
        sync.projection_fingerprint(m, k=0)
    with pytest.raises(ValueError):
        sync.swap_elements(torch.zeros(3), 0, 1)  # equal elements: no desync


def _sync_ranks(rank, world_size):
    out = {}
    for hidden in (8, 256):  # bytes sent must not grow with the model
        m = _model(hidden=hidden)
        with CommCounter() as c:
            out[("ok", hidden)] = sync.verify_parameter_sync(m, "hash")
        out[("bytes", hidden)] = sum(c.bytes.values())
        out[("calls", hidden)] = sum(c.calls.values())
        if rank == 2:
            sync.swap_elements(m[0].weight, 0, 3)
        out[("weak", hidden)] = sync.verify_parameter_sync(m, "sum", rtol=1e-6)
        out[("hash", hidden)] = sync.verify_parameter_sync(m, "hash")
        out[("proj", hidden)] = sync.verify_parameter_sync(m, "projection", k=4)
    return out


def test_verify_parameter_sync_on_three_gloo_ranks():
    res = launch(_sync_ranks, 3)
    for out in res:
        for hidden in (8, 256):
            assert out[("ok", hidden)] == []
            assert out[("weak", hidden)] == []  # the swap keeps the sum
            assert out[("hash", hidden)] == [2] and out[("proj", hidden)] == [2]
            assert out[("calls", hidden)] == 1
        assert out[("bytes", 8)] == out[("bytes", 256)] == 3 * 4 * 8  # world * 4 int64 words
    with pytest.raises(ValueError):
        sync.verify_parameter_sync(_model())  # no process group here


@pytest.mark.parametrize("c,r,s", [(2.0, 1e-4, 0.5), (0.05, 1e-6, 1.0), (30.0, 1e-3, 2.0), (1.0, 0.2, 1.0)])
def test_best_check_interval_is_the_brute_force_minimum(c, r, s):
    Ts = np.arange(1, 200_001)
    cost = c / Ts + r * s * (Ts + 1) / 2
    assert sync.best_check_interval(c, r, s) == int(Ts[np.argmin(cost)])
    assert sync.check_cost_per_step(7, c, r, s) == pytest.approx(cost[6])
    assert sync.best_check_interval(c, r, s, integer=False) == pytest.approx(math.sqrt(2 * c / (r * s)))


def test_cadence_cost_matches_a_monte_carlo():
    for T in (5, 50):
        mc = sync.simulate_check_cost(T, 0.3, 2e-3, 1.0, n_steps=2_000_000, seed=1)
        assert mc == pytest.approx(sync.check_cost_per_step(T, 0.3, 2e-3, 1.0), rel=0.05)
    for bad in [dict(check_cost_s=0), dict(desync_rate_per_step=1.5), dict(step_time_s=-1)]:
        args = dict(check_cost_s=1.0, desync_rate_per_step=1e-3, step_time_s=1.0) | bad
        with pytest.raises(ValueError):
            sync.best_check_interval(**args)
    with pytest.raises(ValueError):
        sync.check_cost_per_step(0, 1.0, 1e-3, 1.0)


# ---------------------------------------------------------------- CH26-25 async and local SGD


@pytest.fixture(scope="module")
def problem():
    return asg.least_squares_problem(seed=0)


@pytest.mark.parametrize("W", [2, 4, 8])
def test_equal_fixed_speeds_give_staleness_w_minus_1(problem, W):
    r = asg.simulate_async_sgd(problem, [1.0] * W, 10 * W, 0.01)
    assert list(r["staleness"][:W]) == list(range(W))  # the first round: 0, 1, ..., W-1
    assert np.all(r["staleness"][W:] == W - 1)
    assert asg.expected_staleness([1.0] * W)["mean"] == W - 1
    assert asg.staleness_from_trace(r["trace"]) == list(r["staleness"])


def test_measured_staleness_matches_theory_with_random_and_unequal_speeds(problem):
    r = asg.simulate_async_sgd(problem, [1.0] * 8, 6000, 0.01, jitter="exp", seed=2)
    assert r["staleness"][500:].mean() == pytest.approx(7.0, rel=0.05)
    tau = [1.0, 1.0, 2.0, 4.0]
    r = asg.simulate_async_sgd(problem, tau, 6000, 0.01, jitter="fixed", seed=2)
    theory = asg.expected_staleness(tau)
    for w in range(4):
        assert r["staleness"][r["worker"] == w][50:].mean() == pytest.approx(theory["per_worker"][w], rel=0.1)
    assert r["staleness"][200:].mean() == pytest.approx(theory["mean"], rel=0.05)


def test_staleness_from_a_hand_made_trace():
    trace = [(0, 0, "read"), (0, 1, "read"), (1, 0, "write"), (1, 0, "read"), (2, 0, "write"),
             (2, 0, "read"), (3, 1, "write")]
    assert asg.staleness_from_trace(trace) == [0, 0, 2]
    with pytest.raises(ValueError):
        asg.staleness_from_trace([(0, 0, "write")])
    with pytest.raises(ValueError):
        asg.staleness_from_trace([(0, 0, "peek")])


def test_one_worker_async_is_serial_sgd(problem):
    r = asg.simulate_async_sgd(problem, [0.5], 20, 0.1, batch=4, seed=3)
    rng, x = np.random.default_rng(3), np.zeros(problem["A"].shape[1])
    for loss in r["losses"]:
        rows = rng.integers(0, len(problem["b"]), 4)
        A, b = problem["A"][rows], problem["b"][rows]
        x = x - 0.1 * A.T @ (A @ x - b) / 4
        assert loss == pytest.approx(asg.excess_loss(problem, x), rel=1e-10)
    assert np.all(r["staleness"] == 0) and r["times"][-1] == pytest.approx(10.0)


def test_regimes_async_vs_sync_and_damping(problem):
    tau = [1.0] * 7 + [6.0]  # one straggler
    a = asg.simulate_async_sgd(problem, tau, 3000, 0.03, jitter="exp", seed=0)
    s = asg.simulate_sync_sgd(problem, tau, 600, 0.12, jitter="exp", seed=0)
    assert asg.time_to_loss(a["times"], a["losses"], 0.02) < asg.time_to_loss(s["times"], s["losses"], 0.02)
    big = [1.0] * 32  # staleness ~31 at a rate serial SGD handles well
    plain = asg.simulate_async_sgd(problem, big, 2000, 0.2, jitter="exp", seed=0)
    damped = asg.simulate_async_sgd(problem, big, 2000, 0.2, jitter="exp", damping=True, seed=0)
    serial = asg.simulate_async_sgd(problem, [1.0], 2000, 0.2, seed=0)
    assert not np.isfinite(plain["losses"][-1]) or plain["losses"][-1] > 1.0
    assert damped["losses"][-200:].mean() < 0.05 and serial["losses"][-200:].mean() < 0.05


def test_sync_and_local_sgd_count_time_and_rounds(problem):
    s = asg.simulate_sync_sgd(problem, [1.0, 3.0], 10, 0.05, comm_time_s=0.5)
    np.testing.assert_allclose(s["times"], 3.5 * np.arange(1, 11))
    for H in (1, 4, 16):
        r = asg.simulate_local_sgd(problem, [1.0, 2.0], 64, H, 0.05, comm_time_s=1.0)
        assert r["rounds"] == 64 // H and r["gradients"] == 2 * 64
        assert r["times"][-1] == pytest.approx(64 // H * (2.0 * H + 1.0))
    # non-iid shards: the copies drift during long local phases, the floor rises with H
    floor = {H: asg.simulate_local_sgd(problem, [1.0] * 4, 256, H, 0.05, shards="sorted", seed=0)["losses"][-1]
             for H in (1, 64)}
    assert floor[64] > 2 * floor[1]
    with pytest.raises(ValueError):
        asg.simulate_local_sgd(problem, [1.0], 10, 4, 0.05)  # 10 is not a multiple of 4
    with pytest.raises(ValueError):
        asg.simulate_async_sgd(problem, [1.0, -1.0], 10, 0.05)
    with pytest.raises(ValueError):
        asg.simulate_sync_sgd(problem, [1.0], 10, 0.05, jitter="gauss")


def test_local_sgd_on_gloo_all_reduces_every_h_steps():
    res = launch(asg.local_sgd_rank, 2, kwargs=dict(n_steps=32, H=8))
    assert [r["calls"] for r in res] == [4, 4]
    assert res[0]["bytes"] == 4 * 10 * 8  # 4 calls x 10 float64 parameters
    assert torch.equal(res[0]["x"], res[1]["x"])


# ---------------------------------------------------------------- fault injection


def test_hung_collective_fails_within_the_timeout():
    r = faults.run_hung_collective(collective_timeout=2.0)
    assert r["failed"] and r["seconds"] < 15, r
    assert "rank 0" in r["message"] and "imed out" in r["message"]


def test_nan_gradient_step_is_skipped_and_scale_halved():
    for bad in (float("nan"), float("inf")):
        r = faults.grad_scaler_nan_step(n_steps=4, bad_step=1, bad_value=bad, init_scale=256.0)
        assert r["skipped"] == [False, True, False, False]
        assert r["scales"] == [256.0, 256.0, 128.0, 128.0]
        assert torch.equal(r["params"][1], r["params"][0])
        assert not torch.equal(r["params"][2], r["params"][1])
    with pytest.raises(ValueError):
        faults.grad_scaler_nan_step(bad_value=1.0)


def test_desynced_rank_is_named_by_the_strong_check_only():
    for how in ("swap", "shift"):
        assert faults.run_desync_check(3, 2, how) == {"weak": [], "hash": [2], "projection": [2]}
    with pytest.raises(ValueError):
        faults.run_desync_check(3, 0)
