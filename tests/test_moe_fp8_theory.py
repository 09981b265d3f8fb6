"""The references of 12 theory against published numbers, torch's own formats and brute force."""
import itertools
import math

import pytest
import torch

from solutions_lib import moe_fp8_theory as m
from solutions_lib import checks_moe_fp8_theory as P


def test_mixtral_and_olmoe_published_counts():
    c = m.moe_param_counts(**m.MIXTRAL_8X7B)
    assert c["total"] == 46_702_792_704          # the Hugging Face checkpoint's parameter count
    assert round(c["active"] / 1e9, 1) == 12.9
    o = m.moe_param_counts(**m.OLMOE_1B_7B)
    assert round(o["total"] / 1e9, 1) == 6.9 and round(o["active"] / 1e9, 1) == 1.3


def test_param_counts_against_module_count():
    # a literal model: count its parameters with torch
    d, f, L, E, k, V, a, akv, dh, s = 16, 24, 3, 6, 2, 50, 4, 2, 8, 1
    mods = []
    for _ in range(L):
        mods += [torch.nn.Linear(d, a * dh, bias=False), torch.nn.Linear(d, akv * dh, bias=False),
                 torch.nn.Linear(d, akv * dh, bias=False), torch.nn.Linear(a * dh, d, bias=False),
                 torch.nn.Linear(d, E, bias=False), torch.nn.RMSNorm(d), torch.nn.RMSNorm(d)]
        mods += [torch.nn.Linear(d, f, bias=False) for _ in range(2 * (E + s))] + \
                [torch.nn.Linear(f, d, bias=False) for _ in range(E + s)]
    mods += [torch.nn.RMSNorm(d), torch.nn.Embedding(V, d), torch.nn.Linear(d, V, bias=False)]
    total = sum(p.numel() for mod in mods for p in mod.parameters())
    c = m.moe_param_counts(d, f, L, E, k, V, a, akv, dh, n_shared=s)
    assert c["total"] == total
    assert c["total"] - c["active"] == L * (E - k) * 3 * d * f
    assert c["train_flops_per_token"] == 6 * (c["active"] - V * d - (2 * L + 1) * d)


def test_capacity_report_brute_force():
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        E = int(torch.randint(2, 9, (1,), generator=gen))
        k = int(torch.randint(1, E + 1, (1,), generator=gen))
        T = int(torch.randint(1, 40, (1,), generator=gen))
        choice = torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(T)])
        load = torch.bincount(choice.reshape(-1), minlength=E).tolist()
        for cf in (0.5, 1.0, 1.25, 2.0):
            r = m.capacity_report(load, k, cf)
            C = math.ceil(cf * T * k / E)
            assert r["capacity"] == C and r["tokens"] == T
            assert r["dropped"] == P.brute_drops(load, C)
        f = r["min_factor"]
        assert m.capacity_report(load, k, f)["dropped"] == 0
        assert abs(f - max(load) / (sum(load) / E)) < 1e-12


def test_ep_vs_dp_crossover():
    r = m.ep_vs_dp_bytes(4096, 4096, 14336, 8, 2, 8)
    assert r["crossover_tokens"] == 86016
    at = m.ep_vs_dp_bytes(86016, 4096, 14336, 8, 2, 8)
    assert at["ep"] == pytest.approx(at["dp"], rel=1e-12)
    assert m.ep_vs_dp_bytes(10, 64, 64, 4, 1, 1)["ep"] == 0.0


@pytest.mark.parametrize("dtype,e,mb,kind", P.TORCH_FORMATS)
def test_fp_format_against_torch(dtype, e, mb, kind):
    got, want = m.fp_format(e, mb, kind), P.dtype_facts(dtype)
    for key, v in want.items():
        assert got[key] == v, (dtype, key)


def test_fp_format_mx_and_binades():
    for (e, mb), want in P.MX_PUBLISHED.items():
        got = m.fp_format(e, mb, "mx")
        assert all(got[k] == v for k, v in want.items())
    assert m.fp_format(4, 3, "fn")["binades"] == pytest.approx(math.log2(448) + 9)
    assert m.fp_format(5, 2, "ieee")["binades"] == pytest.approx(math.log2(57344) + 16)


def test_fp_format_brute_force_decode():
    # decode every code of small formats by their bit layout and compare
    for e, mb, kind in itertools.product((2, 3, 4, 5), (1, 2, 3), ("ieee", "fn", "fnuz", "mx")):
        bias = 2 ** (e - 1) if kind == "fnuz" else 2 ** (e - 1) - 1
        vals = []
        for E_ in range(2 ** e):
            for M in range(2 ** mb):
                if kind == "ieee" and E_ == 2 ** e - 1:
                    continue
                if kind == "fn" and E_ == 2 ** e - 1 and M == 2 ** mb - 1:
                    continue
                vals.append(2.0 ** (E_ - bias) * (1 + M / 2 ** mb) if E_ else 2.0 ** (1 - bias) * M / 2 ** mb)
        got = m.fp_format(e, mb, kind)
        pos = sorted(v for v in vals if v > 0)
        assert got["max_normal"] == max(vals) and got["min_subnormal"] == pos[0]


def test_tiles_and_roofline():
    assert m.fa2_tile_budget(128, 128, 128, 3, 4)["fits"] is False
    assert m.fa2_tile_budget(128, 128, 128, 3, 8)["fits"] is True
    assert m.fa2_tile_budget(64, 64, 64, 3, 4)["shared_bytes"] == (64 * 64 + 6 * 64 * 64) * 2
    r = m.tile_roofline(128, 128, 64)
    assert r["intensity"] == 64 and r["bound"] == "memory"
    assert r["ridge"] == pytest.approx(295.34, abs=0.01)
    assert m.tile_roofline(1024, 1024, 32)["bound"] == "compute"


@pytest.mark.parametrize("call", [
    lambda: m.moe_param_counts(4096, 14336, 32, 8, 9, 32000, 32, 8, 128),
    lambda: m.moe_param_counts(4096, 14336, 32, 8, 2, 32000, 32, 5, 128),
    lambda: m.capacity_report([3, 2], 2, 1.0),
    lambda: m.capacity_report([1, -1, 2], 1, 1.0),
    lambda: m.capacity_report([2, 2], 1, 0.0),
    lambda: m.ep_vs_dp_bytes(10, 8, 8, 6, 2, 4),
    lambda: m.fp_format(4, 3, "ocp"),
    lambda: m.fp_format(1, 3, "mx"),
    lambda: m.fa2_tile_budget(0, 64, 64),
    lambda: m.tile_roofline(128, 128, 64, peak_flops=-1),
])
def test_value_errors(call):
    with pytest.raises(ValueError):
        call()


def test_bench():
    assert m.bench_moe_fp8_theory(out=lambda *a: None)
