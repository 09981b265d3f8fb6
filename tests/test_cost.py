"""solutions_lib.cost against hand-computed closed forms and brute-force scans."""
import math

import pytest

from solutions_lib.cost import TrainingCostEstimator as TCE

# exercise 26.20: (N, D, GPUs, MFU), A100 80GB at $3.50/GPU-h, 65% spot discount, 30 min lost
CH26_20 = [(110e6, 3.3e9, 8, 0.45), (345e6, 40e9, 16, 0.42), (3e9, 500e9, 64, 0.38)]


@pytest.mark.parametrize("n,d,g,m", CH26_20)
def test_ch26_20_closed_forms(n, d, g, m):
    e = TCE(n, d, g, m)
    hours = 6 * n * d / (g * 312e12 * m) / 3600
    assert e.compute_hours == pytest.approx(hours, rel=1e-12)
    assert e.gpu_hours == pytest.approx(g * hours, rel=1e-12)
    assert e.on_demand_cost == pytest.approx(g * hours * 3.50, rel=1e-12)
    assert e.spot_cost == pytest.approx(g * hours * 3.50 * 0.35, rel=1e-12)


def test_ch26_20_hand_numbers():
    costs = [round(TCE(*c).on_demand_cost, 2) for c in CH26_20]
    assert costs == [15.08, 614.32, 73802.29]
    assert [TCE(*c).break_even_preemptions for c in CH26_20] == [3, 41, 1224]


@pytest.mark.parametrize("n,d,g,m", CH26_20 + [(1e9, 20e9, 32, 0.5), (7e9, 1e12, 256, 0.4)])
@pytest.mark.parametrize("disc,lost", [(0.65, 0.5), (0.3, 2.0), (0.9, 0.25)])
def test_break_even_matches_scan(n, d, g, m, disc, lost):
    e = TCE(n, d, g, m, spot_discount=disc, lost_hours_per_preemption=lost)
    k = 0
    while TCE(n, d, g, m, spot_discount=disc, lost_hours_per_preemption=lost, preemptions=k).spot_cost <= e.on_demand_cost:
        k += 1
    assert e.break_even_preemptions == k


def test_ch26_21_options():
    a = TCE(1e9, 0, 32, 0.45, price_per_gpu_hour=3.50, total_flops_target=1e21)
    b = TCE(1e9, 0, 128, 0.35, price_per_gpu_hour=1.10, spot_discount=0.0, preemptions_per_day=2,
            lost_hours_per_preemption=1.0, total_flops_target=1e21)
    ta = 1e21 / (32 * 312e12 * 0.45) / 3600
    assert a.compute_hours == pytest.approx(ta) and a.on_demand_cost == pytest.approx(32 * ta * 3.5)
    tb = 1e21 / (128 * 312e12 * 0.35) / 3600
    wall = tb / (1 - 2 * 1 / 24)
    assert b.spot_wall_hours == pytest.approx(wall)
    assert b.n_preemptions == pytest.approx(2 * wall / 24)
    assert wall == pytest.approx(tb + b.n_preemptions * 1.0)  # self-consistent
    assert b.spot_cost == pytest.approx(128 * wall * 1.10)
    assert a.flops_within_budget(50_000) == pytest.approx(50_000 / 3.5 * 3600 * 312e12 * 0.45)
    assert b.flops_within_budget(50_000, spot=True) == pytest.approx(50_000 / 1.1 * 3600 * 312e12 * 0.35 * 11 / 12)
    assert b.flops_within_budget(50_000, spot=True) > a.flops_within_budget(50_000)
    assert round(a.on_demand_cost) == 6925 and round(b.spot_cost) == 3053


def test_fixed_preemptions_and_spot_cost_with():
    e = TCE(1e9, 1e10, 8, 0.5, preemptions=3, lost_hours_per_preemption=0.5)
    assert e.spot_wall_hours == pytest.approx(e.compute_hours + 1.5)
    assert e.spot_cost == pytest.approx(e.spot_cost_with(3))
    assert e.useful_fraction(True) == pytest.approx(e.compute_hours / (e.compute_hours + 1.5))


@pytest.mark.parametrize("kw", [dict(n_params=-1), dict(n_gpus=0), dict(n_gpus=2.5), dict(mfu=0), dict(mfu=1.2),
                                dict(spot_discount=1.0), dict(spot_discount=-0.1), dict(preemptions=-1),
                                dict(preemptions=2, preemptions_per_day=1), dict(preemptions_per_day=30,
                                                                                 lost_hours_per_preemption=1),
                                dict(price_per_gpu_hour=0), dict(total_flops_target=-5)])
def test_bad_input(kw):
    base = dict(n_params=1e9, n_tokens=1e10, n_gpus=8, mfu=0.4)
    with pytest.raises(ValueError):
        TCE(**{**base, **kw})


def test_no_lost_work_has_no_break_even():
    with pytest.raises(ValueError):
        TCE(1e9, 1e10, 8, 0.4, lost_hours_per_preemption=0).break_even_preemptions
    with pytest.raises(ValueError):
        TCE(1e9, 1e10, 8, 0.4).flops_within_budget(-1)
    assert math.isfinite(TCE(1e9, 1e10, 8, 0.4, spot_discount=0).break_even_preemptions)
