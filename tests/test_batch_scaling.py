"""solutions_lib.batch_scaling: batch accounting, scaling rules (closed forms and the CH26-15
table), the two-batch noise-scale estimator checked by Monte Carlo on a problem whose noise
is known exactly, the 1/B variance law, the per-GPU batch plan, and the ValueError cases."""
import math

import numpy as np
import pytest

from solutions_lib import batch_scaling as B
from solutions_lib import schedules as S


def test_reexported_from_schedules():
    for name in B.__all__:
        assert getattr(S, name) is getattr(B, name)


def test_batch_accounting_seed_numbers():
    assert B.tokens_per_step(4, 2048, 32, 8) == 2_097_152  # TSX-04: 2^21
    assert B.sequences_per_step(4, 32, 8) == 1024
    assert B.sequences_per_step(2, 64, 8) == 1024 and B.tokens_per_step(2, 4096, 64, 8) == 4_194_304  # TH-04
    assert isinstance(B.tokens_per_step(1, 1, 1), int)


def test_scale_lr_rules():
    assert B.scale_lr(3e-4, 256, 1024) == pytest.approx(1.2e-3, rel=1e-14)
    assert B.scale_lr(3e-4, 256, 1024, "sqrt") == pytest.approx(6e-4, rel=1e-14)
    assert B.scale_lr(0.1, 256, 64) == pytest.approx(0.025)  # scaling down works too
    rng = np.random.default_rng(5)
    for _ in range(50):
        lr, b0, b1 = 10 ** rng.uniform(-5, -1), int(rng.integers(1, 5000)), int(rng.integers(1, 5000))
        assert B.scale_lr(lr, b0, b1, "sqrt") ** 2 == pytest.approx(lr * B.scale_lr(lr, b0, b1), rel=1e-12)


def test_ch26_15_table():
    rows = [(256, 1e-3, 4096), (64, 5e-4, 2048), (512, 3e-4, 32768)]
    table = B.linear_scaling_table(rows)
    assert [round(lr, 10) for lr, _ in table] == [0.016, 0.016, 0.0192]
    assert [flag for _, flag in table] == [True, True, True]
    assert B.linear_scaling_table([(256, 1e-4, 512)]) == [(pytest.approx(2e-4), False)]


def linreg_sq_norms(rng, w, w_star, sigma, batch, n):
    d = w.size
    out = np.empty(n)
    for i in range(n):
        x = rng.standard_normal((batch, d))
        y = x @ w_star + sigma * rng.standard_normal(batch)
        g = x.T @ (x @ w - y) / batch
        out[i] = g @ g
    return out


def test_linear_regression_noise_formula_against_monte_carlo():
    rng = np.random.default_rng(0)
    d, sigma = 6, 0.7
    w_star = rng.standard_normal(d)
    w = w_star + rng.standard_normal(d)
    g, trace = B.linear_regression_gradient_stats(w, w_star, sigma)
    x = rng.standard_normal((400_000, d))
    eps = sigma * rng.standard_normal(400_000)
    per_ex = x * (x @ (w - w_star) - eps)[:, None]
    np.testing.assert_allclose(per_ex.mean(axis=0), g, atol=0.02)
    assert B.population_gradient_trace(per_ex) == pytest.approx(trace, rel=0.02)
    assert B.linear_regression_noise_scale(w, w_star, sigma) == pytest.approx(trace / (g @ g), rel=1e-14)


def test_two_batch_estimator_recovers_known_noise_scale():
    rng = np.random.default_rng(1)
    d, sigma = 12, 1.0
    w_star = rng.standard_normal(d)
    w = w_star + 0.4 * rng.standard_normal(d)
    exact = B.linear_regression_noise_scale(w, w_star, sigma)
    small = linreg_sq_norms(rng, w, w_star, sigma, 4, 3000)
    big = linreg_sq_norms(rng, w, w_star, sigma, 256, 3000)
    g2, trace = B.noise_scale_components(small, big, 4, 256)
    _, true_trace = B.linear_regression_gradient_stats(w, w_star, sigma)
    assert trace == pytest.approx(true_trace, rel=0.05)
    assert g2 == pytest.approx(float((w - w_star) @ (w - w_star)), rel=0.1)
    assert B.gradient_noise_scale(small, big, 4, 256) == pytest.approx(exact, rel=0.1)


def test_two_batch_estimator_is_exact_on_expected_values():
    g2, trace = 2.5, 40.0
    s, b = g2 + trace / 8, g2 + trace / 128
    assert B.noise_scale_components(s, b, 8, 128) == (pytest.approx(g2), pytest.approx(trace))
    assert B.gradient_noise_scale([s, s], [b, b], 8, 128) == pytest.approx(16.0)


def test_variance_of_mean_gradient_falls_as_one_over_b():
    rng = np.random.default_rng(2)
    grads = rng.standard_normal((500, 8)) * np.arange(1, 9) + 3.0
    trace = B.population_gradient_trace(grads)
    sizes = [1, 2, 4, 8, 16, 32, 64]
    var = [B.minibatch_gradient_variance(grads, b, 4000, rng) for b in sizes]
    np.testing.assert_allclose(np.array(var) * sizes, trace, rtol=0.06)
    assert B.loglog_slope(sizes, var) == pytest.approx(-1.0, abs=0.03)
    assert B.loglog_slope([1, 10, 100], [5, 0.5, 0.05]) == pytest.approx(-1.0, rel=1e-12)


def test_noise_model_limits():
    # lr_opt(B) ~ lr_max * B / B_noise for small B (the linear rule), -> lr_max for large B
    assert B.optimal_lr_noise_model(1, 1.0, 1000) == pytest.approx(1 / 1001)
    assert B.optimal_lr_noise_model(1000, 1.0, 1000) == pytest.approx(0.5)
    assert B.optimal_lr_noise_model(1e9, 1.0, 1000) == pytest.approx(1.0, rel=1e-5)
    s, e = B.steps_examples_tradeoff(np.array([512, 4096, 32768]), 4096)
    np.testing.assert_allclose(s, [9, 2, 1.125])
    np.testing.assert_allclose(e, [1.125, 2, 9])
    np.testing.assert_allclose((s - 1) * (e - 1), 1.0)


def test_plan_per_gpu_batch_ch26_16():
    assert B.plan_per_gpu_batch(4096, 16) == (256, 16, 1)
    assert B.plan_per_gpu_batch(4096, 128) == (32, 128, 1)
    assert B.plan_per_gpu_batch(4096, 128, min_per_gpu=64) == (64, 64, 2)
    assert B.plan_per_gpu_batch(4096, 96, min_per_gpu=64) == (85, 48, 2)
    rng = np.random.default_rng(9)
    for _ in range(100):
        bc, n, m = int(rng.integers(64, 20000)), int(rng.integers(1, 300)), int(rng.integers(1, 64))
        per, dp, mp = B.plan_per_gpu_batch(bc, n, m)
        assert dp * mp == n and per * dp <= bc and per >= m


@pytest.mark.parametrize("call", [
    lambda: B.scale_lr(1e-3, 256, 1024, rule="cubic"),
    lambda: B.scale_lr(1e-3, 0, 1024),
    lambda: B.scale_lr(-1e-3, 256, 1024),
    lambda: B.tokens_per_step(0, 2048, 8, 1),
    lambda: B.tokens_per_step(4, 2048, 8, 1.5),
    lambda: B.sequences_per_step(4, -1, 1),
    lambda: B.linear_scaling_table([(256, 1e-3)]),
    lambda: B.noise_scale_components(1.0, 0.5, 64, 8),
    lambda: B.noise_scale_components([], [1.0], 8, 64),
    lambda: B.noise_scale_components(-1.0, 0.5, 8, 64),
    lambda: B.gradient_noise_scale(10.0, 1.0, 8, 64),  # estimated |G|^2 <= 0
    lambda: B.gradient_noise_scale(1.0, 1.0 + 1e-3, 8, 64),  # estimated tr(Sigma) < 0
    lambda: B.linear_regression_noise_scale([1.0, 2.0], [1.0, 2.0], 1.0),
    lambda: B.linear_regression_gradient_stats([1.0], [1.0, 2.0], 1.0),
    lambda: B.optimal_lr_noise_model(0, 1.0, 10),
    lambda: B.plan_per_gpu_batch(4096, 0),
    lambda: B.plan_per_gpu_batch(16, 8, min_per_gpu=32),
    lambda: B.minibatch_gradient_variance(np.ones(5), 2, 10, np.random.default_rng(0)),
    lambda: B.loglog_slope([1, 2], [1, -1]),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_value_error_messages_say_why():
    with pytest.raises(ValueError, match="'linear' or 'sqrt'"):
        B.scale_lr(1e-3, 256, 1024, rule="cubic")
    with pytest.raises(ValueError, match="more batches"):
        B.gradient_noise_scale(10.0, 1.0, 8, 64)
    with pytest.raises(ValueError, match="negative"):
        B.gradient_noise_scale(1.0, 1.0 + 1e-3, 8, 64)
    assert math.isfinite(B.gradient_noise_scale(1.0, 0.5, 8, 64))
