"""07 exercises 2, Exercise D4 (issue 27 depth: exponential throughput as a third roof). The reference
`attention_roofs` against independent oracles: the scores counted from a materialised causal mask, the
roofs from a brute-force search over head dims, the published H100 numbers, and the checks' own cases."""
from __future__ import annotations

import math

import pytest
import torch

from solutions_lib import attention_roofs as R
from solutions_lib import checks_exp_roof as CX


@pytest.mark.parametrize("n", [1, 2, 7, 64, 129])
def test_scores_are_the_unmasked_entries_of_the_causal_mask(n):
    mask = torch.ones(n, n, dtype=torch.bool).tril()       # query i sees keys j <= i
    r = R.attention_time_roofs(n, 16, 1e6, 1e14, 1e12, 1e12, causal=True)
    assert r["scores"] == int(mask.sum())
    assert R.attention_time_roofs(n, 16, 1e6, 1e14, 1e12, 1e12)["scores"] == n * n


def test_the_flashattention3_numbers():
    """FA3 sec. 3.1: at d = 128 there are 512x more matmul FLOPs than exponentials and the exponentials
    take about half the matmul time on an H100 SXM (989 TFLOP/s vs 3.9 TFLOP/s of special functions)."""
    r = R.attention_time_roofs(4096, 128, 1.0, 989e12, 3.35e12, 3.9e12)
    assert 4 * 128 == 512
    assert r["exp"] / r["matmul"] == pytest.approx(0.495, abs=0.005)
    assert r["bound"] == "matmul"
    assert 16 * 132 * 1.83e9 == pytest.approx(3.9e12, rel=0.01)   # 16 SFU results per SM per clock


@pytest.mark.parametrize("F,E", [(989e12, 3.9e12), (1979e12, 3.9e12), (312e12, 2.4e12), (2.0 ** 38, 2.0 ** 30),
                                 (3 * 2.0 ** 42, 2.0 ** 40), (1e12, 1e12), (4e12, 1e12), (4.0000001e12, 1e12)])
def test_head_dim_against_a_search(F, E):
    """The largest d whose exponential roof is strictly above its matmul roof, by trying every d (exact)."""
    from fractions import Fraction
    best = 0
    for d in range(1, 2000):
        if Fraction(1) / Fraction(E) > 4 * d * Fraction(1) / Fraction(F):
            best = d
    assert R.largest_exp_bound_head_dim(F, E) == best


def test_bound_follows_the_roofs_and_ties():
    assert R.attention_time_roofs(1024, 64, 2 ** 28, 2.0 ** 40, 2.0 ** 40, 2.0 ** 32)["bound"] == "matmul"
    assert R.attention_time_roofs(1024, 16, 2 ** 20, 2.0 ** 40, 2.0 ** 36, 2.0 ** 32)["bound"] == "exp"
    for case in CX.roof_cases(5)[-1:]:     # the exact memory = exp tie above the matmul roof
        r = R.attention_time_roofs(*case)
        assert r["memory"] == r["exp"] > r["matmul"] and r["bound"] == "memory"
    for seed in range(4):
        for case in CX.roof_cases(seed):
            r = R.attention_time_roofs(*case)
            assert r["time"] == max(r["matmul"], r["memory"], r["exp"])
            assert r[r["bound"]] == r["time"]


def test_hidden_head_dim_cases_stay_off_the_boundary():
    for seed in range(6):
        for F, E in CX.head_dim_cases(seed)[:-1]:
            k = F / (4 * E)
            assert 0.04 < k - math.floor(k) < 0.96
        F, E = CX.head_dim_cases(seed)[-1]
        assert R.largest_exp_bound_head_dim(F, E) == int(F / (4 * E)) - 1


@pytest.mark.parametrize("bad", [dict(seq_len=0), dict(head_dim=2.5), dict(head_dim=True), dict(hbm_bytes=0),
                                 dict(peak_flops=float("inf")), dict(exp_per_second=-1.0), dict(causal="yes")])
def test_bad_input_raises(bad):
    args = dict(seq_len=4096, head_dim=64, hbm_bytes=1e8, peak_flops=989e12, bandwidth=3.35e12, exp_per_second=3.9e12)
    args.update(bad)
    with pytest.raises(ValueError):
        R.attention_time_roofs(**args)
    with pytest.raises(ValueError):
        R.largest_exp_bound_head_dim(float("nan"), 1e12)


def test_bench_runs():
    lines = []
    assert R.bench_exp_roof(lines.append)
    assert any("d <= 63" in x for x in lines) and any("d <= 126" in x for x in lines)
