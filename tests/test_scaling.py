"""solutions_lib.scaling: the closed-form optimum against brute force, published fits and ratios."""
from __future__ import annotations

import numpy as np
import pytest

from solutions_lib import scaling as S


def _brute_force_optimum(compute, fit):
    n = np.logspace(6, 14, 400_001)
    loss = S.chinchilla_loss(n, compute / (6 * n), fit)
    return n[np.argmin(loss)]


@pytest.mark.parametrize("fit", ["hoffmann", "epoch"])
@pytest.mark.parametrize("compute", [1e19, 5.76e23, 3e25])
def test_closed_form_optimum_matches_a_brute_force_search(fit, compute):
    n, d = S.chinchilla_optimal(compute, fit)
    assert 6 * n * d == pytest.approx(compute)
    assert n == pytest.approx(_brute_force_optimum(compute, fit), rel=2e-4)


def test_first_order_condition_balances_the_two_terms():
    f = S.FITS["hoffmann"]
    n, d = S.chinchilla_optimal(1e22)
    assert f.alpha * f.A * n ** -f.alpha == pytest.approx(f.beta * f.B * d ** -f.beta)


def test_epoch_refit_gives_about_twenty_tokens_per_parameter_at_chinchilla_scale():
    # Chinchilla itself: 70B parameters, 1.4T tokens, ~5.76e23 FLOPs, 20 tokens per parameter.
    assert 15 < S.tokens_per_param(5.76e23, "epoch") < 25
    assert S.tokens_per_param(5.76e23, "hoffmann") > 50   # the original fit's known overshoot


def test_loss_values_and_broadcasting():
    f = S.FITS["hoffmann"]
    assert S.chinchilla_loss(70e9, 1.4e12) == pytest.approx(f.E + f.A / 70e9 ** f.alpha + f.B / 1.4e12 ** f.beta)
    grid = S.chinchilla_loss(np.array([[1e9], [1e10]]), np.array([1e10, 1e11, 1e12]))
    assert grid.shape == (2, 3) and np.all(np.diff(grid, axis=0) < 0) and np.all(np.diff(grid, axis=1) < 0)


def test_kaplan_laws():
    assert S.kaplan_loss_params(8.8e13) == pytest.approx(1.0)
    assert S.kaplan_loss_data(5.4e13 / 2 ** (1 / 0.095)) == pytest.approx(2.0)
    assert S.kaplan_loss_compute(3.1e8 * S.PF_DAY) == pytest.approx(1.0)


def test_tokens_for_loss_inverts_the_loss():
    d = S.tokens_for_loss(1e9, 2.6, "epoch")
    assert S.chinchilla_loss(1e9, d, "epoch") == pytest.approx(2.6)
    with pytest.raises(ValueError, match="cannot reach"):
        S.tokens_for_loss(1e6, 2.0)


def test_inference_aware_without_serving_is_the_chinchilla_optimum():
    best = S.inference_aware_optimal(2.1, 0.0)
    n, _ = S.chinchilla_optimal(best["train_flops"])
    assert best["n_params"] == pytest.approx(n, rel=1e-4)


def test_serving_more_tokens_favours_smaller_models_trained_longer():
    sizes = [S.inference_aware_optimal(2.1, t, "epoch")["n_params"] for t in (0, 1e12, 1e13, 1e14)]
    assert sizes == sorted(sizes, reverse=True)
    best = S.inference_aware_optimal(2.1, 1e13, "epoch")
    for factor in (0.8, 1.25):   # brute-force neighbourhood check
        n = best["n_params"] * factor
        other = 6 * n * S.tokens_for_loss(n, 2.1, "epoch") + 2 * n * 1e13
        assert other > best["total_flops"]


@pytest.mark.parametrize("call", [
    lambda: S.chinchilla_loss(0, 1e9), lambda: S.chinchilla_loss(1e9, 1e9, fit="kaplan"),
    lambda: S.chinchilla_optimal(-1), lambda: S.kaplan_loss_params(np.array([1e9, -1])),
    lambda: S.inference_aware_optimal(1.5, 0), lambda: S.inference_aware_optimal(2.0, -5),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


# ---------------------------------------------------------------- fitting a law (EXT-FIT)


@pytest.mark.parametrize("fit", ["hoffmann", "epoch"])
def test_fit_recovers_the_generating_law_from_noise_free_runs(fit):
    r = S.synthetic_scaling_runs(fit, noise=0.0)
    got = S.fit_chinchilla_law(r["n_params"], r["n_tokens"], r["loss"])
    f = S.FITS[fit]
    assert got["alpha"] == pytest.approx(f.alpha, abs=2e-4) and got["beta"] == pytest.approx(f.beta, abs=2e-4)
    assert got["E"] == pytest.approx(f.E, rel=1e-3)
    pred = got["E"] + got["A"] * r["n_params"] ** -got["alpha"] + got["B"] * r["n_tokens"] ** -got["beta"]
    np.testing.assert_allclose(pred, r["loss"], rtol=1e-4)


def test_fit_is_at_least_as_good_as_the_truth_on_noisy_runs():
    r = S.synthetic_scaling_runs("epoch", noise=0.01, seed=3)
    got = S.fit_chinchilla_law(r["n_params"], r["n_tokens"], r["loss"])
    f = r["true"]
    rss_true = np.sum((f.E + f.A * r["n_params"] ** -f.alpha + f.B * r["n_tokens"] ** -f.beta - r["loss"]) ** 2)
    pred = got["E"] + got["A"] * r["n_params"] ** -got["alpha"] + got["B"] * r["n_tokens"] ** -got["beta"]
    assert got["rss"] == pytest.approx(np.sum((pred - r["loss"]) ** 2), rel=1e-6)
    assert got["rss"] <= rss_true
    with pytest.raises(ValueError):
        S.fit_chinchilla_law(r["n_params"][:5], r["n_tokens"][:5], r["loss"][:5])


def test_bootstrap_uses_the_documented_resamples():
    r = S.synthetic_scaling_runs("epoch", noise=0.01, seed=4)
    b = S.bootstrap_chinchilla_fit(r["n_params"], r["n_tokens"], r["loss"], n_boot=5, seed=9)
    idx = np.random.default_rng(9).integers(0, r["loss"].size, (5, r["loss"].size))
    one = S.fit_chinchilla_law(r["n_params"][idx[2]], r["n_tokens"][idx[2]], r["loss"][idx[2]])
    assert b["alpha"][2] == one["alpha"] and b["beta"][2] == one["beta"]
    assert b["a"][2] == pytest.approx(one["beta"] / (one["alpha"] + one["beta"]))
    assert b["alpha_std"] == pytest.approx(np.std(b["alpha"]))


def test_compute_multiplier_with_floor_against_the_law():
    l_inf, a, alpha = 1.69, 3000.0, 0.15
    law = lambda c: l_inf + a * c ** -alpha
    c1 = 1e20
    c2 = c1 * S.compute_multiplier_with_floor(law(c1), 0.95 * law(c1), l_inf, alpha)
    assert law(c2) == pytest.approx(0.95 * law(c1), rel=1e-12)
    assert S.compute_multiplier_with_floor(2.5, 2.25, 0.0, 0.15) == pytest.approx(0.9 ** (-1 / 0.15))
    with pytest.raises(ValueError):
        S.compute_multiplier_with_floor(2.5, 1.6, 1.69, 0.15)
