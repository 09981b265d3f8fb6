"""solutions_lib.numerics against independent oracles: the formats against torch.finfo and the
IEEE-754 closed forms, overflow/underflow against torch's own casts, the loss-scaling
simulator step by step against a real torch.amp.GradScaler("cpu") (planted inf/nan steps,
non-power-of-two factors, a scale at the top of the fp32 range), and the loss-spike detector
on planted traces."""
import math

import numpy as np
import pytest
import torch

from solutions_lib import numerics as N

torch.set_num_threads(1)


# ---------------------------------------------------------------- formats


def test_formats_match_finfo_and_ieee_closed_forms():
    fp16, bf16, fp32 = N.format_info("fp16"), N.format_info("bf16"), N.format_info(torch.float32)
    assert (fp16.max, fp16.smallest_normal, fp16.smallest_subnormal, fp16.eps) == (65504.0, 2.0 ** -14, 2.0 ** -24, 2.0 ** -10)
    assert (fp16.exponent_bits, fp16.mantissa_bits, bf16.exponent_bits, bf16.mantissa_bits) == (5, 10, 8, 7)
    assert bf16.max == pytest.approx(3.39e38, rel=1e-3) and bf16.smallest_normal == fp32.smallest_normal == 2.0 ** -126
    assert bf16.smallest_subnormal == 2.0 ** -133 and fp32.smallest_subnormal == 2.0 ** -149
    for name, (e, m) in {"fp32": (8, 23), "fp16": (5, 10), "bf16": (8, 7), "fp8_e5m2": (5, 2)}.items():
        info, closed = N.format_info(name), N.ieee_limits(e, m)
        fi = torch.finfo(info.dtype)
        assert (info.exponent_bits, info.mantissa_bits, info.bits) == (e, m, fi.bits)
        assert info.max == closed["max"] == fi.max
        assert info.smallest_normal == closed["smallest_normal"] == fi.smallest_normal
        assert info.eps == closed["eps"] == fi.eps
        assert info.smallest_subnormal == closed["smallest_subnormal"]
    e4m3 = N.format_info("fp8_e4m3")
    assert (e4m3.max, e4m3.exponent_bits, e4m3.mantissa_bits, e4m3.smallest_subnormal) == (448.0, 4, 3, 2.0 ** -9)
    assert N.ieee_limits(4, 3)["max"] == 240.0  # the IEEE-style E4M3 would stop at 240; "fn" reuses the top exponent
    assert N.format_info("fp8_e5m2").max == 57344.0
    assert [f.name for f in N.format_table()] == list(N.FORMATS)


def test_smallest_subnormal_is_really_the_smallest_positive_value():
    for name in N.FORMATS:
        info = N.format_info(name)
        tiny = torch.tensor(info.smallest_subnormal, dtype=torch.float64)
        assert float(tiny.to(info.dtype)) == info.smallest_subnormal
        assert float((tiny * 0.49).to(info.dtype)) == 0.0  # below half of it: rounds to zero
        assert float(torch.nextafter(torch.tensor(0.0, dtype=torch.float32), torch.tensor(1.0)).to(torch.float64)) == 2.0 ** -149


def test_classify_overflow_underflow_subnormal():
    c = N.classify
    assert c(65504.0, "fp16")["category"] == "normal"
    assert c(65519.0, "fp16")["stored"] == 65504.0  # below max + half an ulp: rounds down
    assert c(65519.0, "fp16")["category"] == "normal" and N.overflow_threshold("fp16") == 65520.0
    assert N.overflow_threshold("fp8_e4m3") == 464.0 and c(460.0, "fp8_e4m3")["stored"] == 448.0
    assert c(464.0, "fp8_e4m3")["category"] == "overflow"
    for name in ("fp32", "bf16", "fp16", "fp8_e5m2"):  # the threshold itself becomes inf, just below it does not
        thr, dt = N.overflow_threshold(name), N.FORMATS[name]
        assert math.isinf(float(torch.tensor(thr, dtype=torch.float64).to(dt)))
        assert math.isfinite(float(torch.tensor(thr * (1 - 1e-6), dtype=torch.float64).to(dt)))
    assert c(65520.0, "fp16")["category"] == "overflow" and c(65520.0, "fp16")["stored"] == math.inf
    assert c(1e5, "bf16")["category"] == "normal"
    assert c(2.0 ** -24, "fp16")["category"] == "subnormal"
    assert c(2.0 ** -25, "fp16")["category"] == "underflow"  # a tie: rounds to the even neighbour, 0
    assert c(1.1 * 2.0 ** -25, "fp16")["stored"] == 2.0 ** -24
    assert c(1e-8, "fp16")["category"] == "underflow" and c(1e-8, "bf16")["category"] == "normal"
    assert c(1000.0, "fp8_e4m3")["category"] == "overflow"
    assert c(0.0, "fp16")["category"] == "zero"
    assert c(1 + 2 ** -9, "bf16")["relative_error"] == pytest.approx(2 ** -9 / (1 + 2 ** -9))
    for bad in [lambda: N.format_info("fp12"), lambda: N.format_info(torch.int32), lambda: c(float("nan"), "fp16"),
                lambda: N.ieee_limits(1, 3), lambda: N.ieee_limits(5, 0)]:
        with pytest.raises(ValueError):
            bad()


def test_master_weights_keep_the_updates_bf16_loses():
    ups = np.full(1000, 1e-3)
    assert N.accumulate_updates(1.0, ups, "bf16") == 1.0  # 1e-3 < half the bf16 spacing at 1 (2^-8)
    assert N.accumulate_updates(1.0, ups, "bf16", master_fmt="fp32") == float(torch.tensor(2.0).bfloat16())
    assert N.accumulate_updates(1.0, ups, "fp32") == pytest.approx(2.0, rel=1e-4)
    w = torch.tensor(3.0, dtype=torch.float16)
    for u in np.linspace(-1e-3, 2e-3, 50):
        w = w + torch.tensor(u, dtype=torch.float16)
    assert N.accumulate_updates(3.0, np.linspace(-1e-3, 2e-3, 50), "fp16") == float(w)


# ---------------------------------------------------------------- loss scaling


def test_scaled_roundtrip_underflow_and_overflow():
    g = np.array([1e-9, 3e-8, 1e-6, 1e-3, 0.5, 2.0])
    out = N.scaled_roundtrip(g, 1.0)
    assert out[0] == 0 and out[1] != 0 and out[-1] == 2.0  # 1e-9 < 2^-25: flushed; 3e-8 > 2^-25: kept
    assert np.all(N.scaled_roundtrip(g, 2.0 ** 16)[:1] != 0)
    assert np.isinf(N.scaled_roundtrip(g, 2.0 ** 16)[-1])  # 2 * 65536 > 65504
    assert N.underflow_overflow_fractions(g, 1.0) == (1 / 6, 0.0)
    assert N.underflow_overflow_fractions(g, 2.0 ** 16) == (0.0, 1 / 6)
    ref = (torch.tensor(g, dtype=torch.float32) * 1024.0).half().double().numpy() / 1024.0
    np.testing.assert_array_equal(N.scaled_roundtrip(g, 1024.0), ref)
    with pytest.raises(ValueError):
        N.scaled_roundtrip(g, 0.0)


def assert_same_trace(ours, theirs):
    np.testing.assert_array_equal(ours["scales"], theirs["scales"])
    np.testing.assert_array_equal(ours["skipped"], theirs["skipped"])
    assert ours["final_scale"] == theirs["final_scale"]


def test_simulator_step_by_step_against_gradscaler_with_planted_inf_steps():
    g = np.full((12, 3), 1e-3, dtype=np.float32)
    g[4, 1] = np.inf
    g[7, 0] = np.nan
    g[9, 2] = 1e6  # finite, but overflows fp16 once scaled
    ours = N.simulate_grad_scaler(g, init_scale=2.0 ** 10, growth_interval=3)
    assert_same_trace(ours, N.torch_grad_scaler_trace(g, init_scale=2.0 ** 10, growth_interval=3))
    assert list(np.log2(ours["scales"])) == [10, 10, 10, 11, 11, 10, 10, 10, 9, 9, 8, 8]
    assert list(np.flatnonzero(ours["skipped"])) == [4, 7, 9]
    assert ours["final_scale"] == 2.0 ** 8


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("init,gf,bf,gi,fmt", [(2.0 ** 16, 2.0, 0.5, 7, "fp16"), (3.0, 1.7, 0.3, 2, "fp16"),
                                               (1e5, 3.0, 0.25, 5, "bf16"), (2.0 ** 126, 2.0, 0.5, 1, "fp16")])
def test_simulator_matches_gradscaler_on_random_streams(seed, init, gf, bf, gi, fmt):
    rng = np.random.default_rng(seed)
    g = (rng.standard_normal((120, 6)) * 10.0 ** rng.uniform(-8, 5, (120, 1))).astype(np.float32)
    g[rng.integers(0, 120, 3), 0] = np.inf
    kw = dict(init_scale=init, growth_factor=gf, backoff_factor=bf, growth_interval=gi, fmt=fmt)
    assert_same_trace(N.simulate_grad_scaler(g, **kw), N.torch_grad_scaler_trace(g, **kw))


def test_the_collapse_and_its_fixes():
    g, unstable = N.unstable_gradient_stream(bad_batches=(700,))
    fp16 = N.simulate_grad_scaler(g)
    assert_same_trace(fp16, N.torch_grad_scaler_trace(g))
    s = fp16["scales"]
    assert s[0] == 2.0 ** 16 and s[699] == 2.0 ** 16 and s[701] == 2.0 ** 15  # one bad batch: one backoff
    assert fp16["final_scale"] < 2.0 ** 3 and np.log2(s[-1]) < np.log2(s[-200])  # collapsed, still falling
    bf16 = N.simulate_grad_scaler(g, fmt="bf16")
    assert bf16["skipped"].sum() == 1 and bf16["final_scale"] == 2.0 ** 16  # only the bad batch
    kept = N.simulate_grad_scaler(g, keep_fp32=unstable)
    assert_same_trace(kept, N.torch_grad_scaler_trace(g, keep_fp32=unstable))
    assert kept["skipped"].sum() == 1
    calm, _ = N.unstable_gradient_stream(lr_scale=0.4, bad_batches=(700,))
    assert N.simulate_grad_scaler(calm)["skipped"].sum() == 1
    # without scaling the small gradients underflow; with 2^16 none do
    assert N.simulate_grad_scaler(g[:50], init_scale=1.0)["underflow"].mean() > 0.005
    assert fp16["underflow"][:50].max() == 0.0


def test_simulator_rejects_bad_arguments():
    g = np.ones((3, 2), dtype=np.float32)
    for kw in [dict(init_scale=0), dict(growth_factor=1.0), dict(backoff_factor=1.0), dict(growth_interval=0),
               dict(fmt="fp7"), dict(keep_fp32=[True])]:
        with pytest.raises(ValueError):
            N.simulate_grad_scaler(g, **kw)
    with pytest.raises(ValueError):
        N.simulate_grad_scaler(np.ones((0, 2)))


# ---------------------------------------------------------------- loss spikes


def test_detector_rule_on_a_hand_made_trace():
    losses = [5.0, 4.0, 3.0, 3.0, 3.1, 2.9, 6.0, 3.0, 3.0, 4.0, 2.9, float("nan"), 3.0]
    np.testing.assert_array_equal(N.trailing_median(losses, 3)[:5], [np.nan, 5.0, 4.5, 4.0, 3.0])
    assert N.detect_loss_spikes(losses, window=3, factor=1.3) == [6, 9, 11]
    assert N.detect_loss_spikes(losses, window=3, factor=1.3, warmup=8) == [9, 11]
    assert N.detect_loss_spikes(losses, window=3, factor=2.5) == [11]
    for kw in [dict(window=0), dict(factor=1.0), dict(factor=float("inf")), dict(warmup=0)]:
        with pytest.raises(ValueError):
            N.detect_loss_spikes(losses, **kw)
    with pytest.raises(ValueError):
        N.detect_loss_spikes([1.0, -2.0])


@pytest.mark.parametrize("seed", range(8))
def test_detector_finds_planted_spikes_and_nothing_else(seed):
    losses, spikes = N.simulate_loss_trace(n_steps=1500, seed=seed, n_spikes=6)
    flagged = N.detect_loss_spikes(losses)
    assert N.spike_detection_scores(flagged, spikes) == (1.0, 1.0)
    smooth, none = N.simulate_loss_trace(n_steps=1500, seed=100 + seed, n_spikes=0)
    assert none == [] and N.detect_loss_spikes(smooth) == []
    assert smooth[0] > 1.5 * smooth[300]  # the warm-up drop is there


def test_detection_scores():
    spikes = [(10, 2), (50, 1)]
    assert N.spike_detection_scores([10, 11, 50], spikes) == (1.0, 1.0)
    assert N.spike_detection_scores([11, 30], spikes) == (0.5, 0.5)
    assert N.spike_detection_scores([], spikes) == (1.0, 0.0)


def test_recorder_sees_softmax_and_the_largest_tensor():
    x = torch.randn(8, 16)
    with N.TensorOpRecorder() as rec:
        y = torch.softmax(x @ x.T, -1)
    assert rec.called("softmax") == ["softmax"] and rec.largest == x.numel() == 2 * y.numel()


# ---------------------------------------------------------------- bf16 weights without an fp32 master copy

def _bf16_neighbours(x: torch.Tensor):
    """The bf16 values just below and just above each fp32 value (equal when x is a bf16 value)."""
    n = x.to(torch.bfloat16)
    up, down = torch.full_like(n, float("inf")), torch.full_like(n, float("-inf"))
    exact = n.float() == x
    lo = torch.where(n.float() > x, torch.nextafter(n, down), n)
    hi = torch.where(n.float() < x, torch.nextafter(n, up), n)
    return torch.where(exact, n, lo), torch.where(exact, n, hi)


def test_stochastic_round_bf16_picks_a_neighbour_and_is_unbiased():
    from solutions_lib.numerics import stochastic_round_bf16

    x = torch.cat([torch.randn(500, generator=torch.Generator().manual_seed(0)) * 10.0 ** torch.arange(-3, 2).repeat(100),
                   torch.tensor([1.0, -2.5, 0.0, 3.0e38])])
    r = stochastic_round_bf16(x, torch.Generator().manual_seed(1))
    lo, hi = _bf16_neighbours(x)
    assert r.dtype == torch.bfloat16 and bool(((r == lo) | (r == hi)).all())
    exact = x.to(torch.bfloat16).float() == x
    assert torch.equal(r[exact], x[exact].to(torch.bfloat16))
    for v in (1.001, -0.3337, 7.0e-5):
        draws = stochastic_round_bf16(torch.full((40000,), v), torch.Generator().manual_seed(2)).double()
        l, h = (t.double()[0] for t in _bf16_neighbours(torch.tensor([v])))
        p = (v - float(l)) / float(h - l)
        sd = float(h - l) * (p * (1 - p) / 40000) ** 0.5
        assert abs(float(draws.mean()) - v) < 5 * sd + 1e-12, (v, float(draws.mean()))
    a = stochastic_round_bf16(x, torch.Generator().manual_seed(5))
    assert torch.equal(a, stochastic_round_bf16(x, torch.Generator().manual_seed(5)))
    assert not torch.equal(a, stochastic_round_bf16(x, torch.Generator().manual_seed(6)))
    for bad in (lambda: stochastic_round_bf16(x.double(), torch.Generator()),
                lambda: stochastic_round_bf16(x, 3),
                lambda: stochastic_round_bf16(torch.tensor([float("nan")]), torch.Generator())):
        with pytest.raises(ValueError):
            bad()


def test_kahan_bf16_step_tracks_the_exact_sum():
    from solutions_lib.numerics import kahan_bf16_step

    g = torch.Generator().manual_seed(3)
    p = torch.ones(64, dtype=torch.bfloat16) * (1 + torch.rand(64, generator=g)).bfloat16()
    exact, plain, c = p.double(), p.clone(), torch.zeros(64, dtype=torch.bfloat16)
    for _ in range(2000):
        u = 1e-4 * torch.randn(64, generator=g).abs() + 2e-5
        p, c = kahan_bf16_step(p, c, u)
        plain = (plain.float() + u).to(torch.bfloat16)
        exact += u.double()
    assert p.dtype == c.dtype == torch.bfloat16
    ulp = exact.abs() * 2.0 ** -7
    assert bool(((p.double() - exact).abs() <= ulp).all())          # within one bf16 step of the exact sum
    assert bool(((plain.double() - exact).abs() > 10 * ulp).all())  # plain bf16 loses the updates
    with pytest.raises(ValueError):
        kahan_bf16_step(p.float(), c, u)
    with pytest.raises(ValueError):
        kahan_bf16_step(p, c[:3], u)
