"""solutions_lib.roofline: FLOP counts against torch's FlopCounterMode, the fit against a known
roofline, and timings that are positive, consistent and ordered (never exact: they are measured)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from solutions_lib import compute as C
from solutions_lib import roofline as R


@pytest.mark.parametrize("m, n, k", [(3, 5, 7), (64, 1, 128), (17, 33, 9)])
def test_gemm_flops_equals_counted_flops(m, n, k):
    with FlopCounterMode(display=False) as counter:
        torch.mm(torch.randn(m, k), torch.randn(k, n))
    assert R.gemm_flops(m, n, k) == counter.get_total_flops()


def test_fit_recovers_a_known_roofline():
    peak, bw = 2.0e11, 2.5e10
    rng = np.random.default_rng(0)
    intensity = 10 ** rng.uniform(-1, 3, 50)
    ceiling = np.minimum(peak, intensity * bw)
    measured = ceiling * rng.uniform(0.3, 1.0, 50)
    measured[np.argmin(intensity)] = ceiling[np.argmin(intensity)]    # one point on each roof
    measured[np.argmax(intensity)] = peak
    got_peak, got_bw = R.fit_roofline(intensity, measured, memory_bound_below=peak / bw)
    assert got_peak == pytest.approx(peak) and got_bw == pytest.approx(bw)
    assert np.all(measured <= np.minimum(got_peak, intensity * got_bw) * (1 + 1e-12))


def test_fit_takes_the_best_memory_bound_point_only_below_the_threshold():
    peak, bw = R.fit_roofline([0.5, 2.0, 50.0], [4e9, 10e9, 100e9], memory_bound_below=4.0)
    assert peak == 100e9 and bw == pytest.approx(8e9)


def test_timings_are_positive_and_ordered():
    tiny = R.time_gemm(8, 8, 8, min_time=0.002)
    big = R.time_gemm(384, 384, 384, min_time=0.005)
    assert 0 < tiny < big
    assert R.gemm_flops(384, 384, 384) / big < 1e14          # no CPU reaches 100 TFLOP/s in fp32


def test_measure_gemms_is_consistent():
    shapes = [(64, 64, 64), (256, 1, 256)]
    res = R.measure_gemms(shapes, min_time=0.002, trials=2)
    flops = np.array([R.gemm_flops(*s) for s in shapes])
    assert np.allclose(res["flops_per_second"] * res["seconds"], flops)
    assert res["intensity"] == pytest.approx([C.gemm_arithmetic_intensity(*s, 4) for s in shapes])


def test_copy_bandwidth_is_plausible():
    assert 1e8 < R.copy_bandwidth(8 * 2 ** 20, min_time=0.005, trials=2) < 1e13


def test_training_throughput_leaves_the_model_untouched():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(11, 16), torch.nn.Linear(16, 11))
    before = [p.detach().clone() for p in model.parameters()]
    tps = R.training_tokens_per_second(model, 2, 8, 11, steps=2)
    assert tps > 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("call", [
    lambda: R.gemm_flops(0, 1, 1), lambda: R.gemm_flops(2, 2.5, 2),
    lambda: R.time_gemm(4, 4, 4, trials=0), lambda: R.measure_gemms([]),
    lambda: R.fit_roofline([1.0, 2.0], [1e9]), lambda: R.fit_roofline([10.0, 20.0], [1e9, 2e9]),
    lambda: R.fit_roofline([1.0, -2.0], [1e9, 2e9]), lambda: R.fit_roofline([1.0], [0.0]),
    lambda: R.copy_bandwidth(0), lambda: R.training_tokens_per_second(torch.nn.Linear(2, 2), 0, 4, 2),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()
