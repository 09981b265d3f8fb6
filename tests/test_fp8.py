"""solutions_lib.fp8 (12 exercises 2, EXT-FP8) against torch's own float8 casts, closed forms and
float64 oracles; what torch 2.13 on a CPU does with float8 (the facts the notebook states)."""
import math

import pytest
import torch

from solutions_lib import fp8, probes_fp8 as P

E4M3, E5M2, E8M0 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu


@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_limits_closed_forms_match_all_256_codes(dtype):
    v = P.finite_values(dtype)
    lim = fp8.fp8_limits(dtype)
    assert lim["max_normal"] == v.max().item() == torch.finfo(dtype).max
    pos = v[v > 0]
    assert lim["min_subnormal"] == pos.min().item()
    assert lim["min_normal"] == torch.finfo(dtype).smallest_normal
    assert {k: lim[k] for k in ("max_normal", "min_normal", "min_subnormal")} == P.limits(dtype)
    assert len(v) == (253 if dtype == E4M3 else 247)
    assert lim["emax"] == (8 if dtype == E4M3 else 15)


def test_torch_cpu_float8_facts():
    # what the notebook says torch 2.13 does on a CPU
    big = torch.tensor([1e6, -math.inf, math.inf])
    assert P.saturated(big, E4M3).float().tolist() == [448.0, -448.0, 448.0]
    assert big.to(E4M3).float().tolist() == [448.0, -448.0, 448.0]          # e4m3fn: torch saturates
    assert torch.isinf(torch.tensor([61440.0]).to(E5M2).float()).all()     # e5m2: torch overflows to inf
    assert torch.tensor([61439.0]).to(E5M2).float().item() == 57344.0
    assert torch.tensor([1.5, 3.0, 0.75, 0.0]).to(E8M0).float().tolist() == [2.0, 4.0, 1.0, 2.0 ** -127]
    n = torch.arange(256, dtype=torch.uint8).view(E8M0).float()
    assert int(torch.isnan(n).sum()) == 1 and torch.equal(n[:255], torch.pow(2.0, torch.arange(-127, 128).float()))
    with pytest.raises(RuntimeError):
        torch.ones(3).to(E4M3) + torch.ones(3).to(E4M3)                    # no elementwise arithmetic


@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_cast_bitwise_on_every_code_midpoint_and_beyond(dtype):
    x = P.rounding_probes(dtype)
    q = fp8.fp8_cast(x, dtype)
    assert q.dtype == dtype and torch.isfinite(q.float()).all()
    assert torch.equal(P.bits(q), P.bits(P.saturated(x, dtype)))
    v = P.finite_values(dtype)
    assert torch.equal(fp8.fp8_cast(v, dtype).float(), v)                  # every value casts to itself
    fmax = fp8.fp8_limits(dtype)["max_normal"]
    assert fp8.fp8_cast(torch.tensor([math.inf, -1e30]), dtype).float().tolist() == [fmax, -fmax]
    # round to nearest even: the midpoint between 1 and the next value goes to 1
    nxt = 1 + fp8.fp8_limits(dtype)["eps"]
    assert fp8.fp8_cast(torch.tensor([(1 + nxt) / 2]), dtype).float().item() == 1.0


def test_cast_counts_boundaries():
    sub = P.limits(E4M3)["min_subnormal"]
    x = torch.tensor([448.0, 448.5, 1e9, -math.inf, sub / 2, -sub / 2, sub / 2 * 1.001, 0.0, 1.0])
    assert fp8.cast_counts(x, E4M3) == (3, 2)
    assert fp8.cast_counts(torch.tensor([57344.0, 60000.0, 2.0 ** -17, 2.0 ** -16]), E5M2) == (1, 1)


@pytest.mark.parametrize("bad", [torch.tensor([1.0, math.nan]), torch.arange(3), [1.0, 2.0]])
def test_bad_inputs_raise(bad):
    with pytest.raises(ValueError):
        fp8.fp8_cast(bad, E4M3)


def test_bad_dtype_and_block_raise():
    with pytest.raises(ValueError):
        fp8.fp8_cast(torch.ones(2), torch.float16)
    with pytest.raises(ValueError):
        fp8.quantize_mx(torch.ones(2, 40), 32)
    with pytest.raises(ValueError):
        fp8.quantize_mx(torch.ones(2, 32), 0)
    with pytest.raises(ValueError):
        fp8.DelayedScaler(E4M3, 0)
    with pytest.raises(ValueError):
        fp8.fp8_gemm(torch.ones(2, 3), torch.ones(4, 2))
    q = torch.ones(2, 64).to(E4M3)
    with pytest.raises(ValueError):
        fp8.fp8_matmul(q, 1.0, q, 1.0)
    with pytest.raises(ValueError):
        fp8.fp8_matmul(q, torch.ones(2, 2), q.t().contiguous(), torch.ones(2, 3), 32)
    with pytest.raises(ValueError):
        fp8.fp8_matmul(q, torch.ones(2, 2), q.t().contiguous(), torch.ones(2, 2), 48)
    with pytest.raises(ValueError):
        fp8.convert_to_fp8("model")


def test_tensorwise_maps_amax_to_max():
    x = torch.randn(50, 30, generator=torch.Generator().manual_seed(1)) * 1e-3
    q, s = fp8.quantize_tensorwise(x, E4M3)
    assert q.float().abs().max().item() == 448.0
    assert math.isclose(float(s) * 448, float(x.abs().max()), rel_tol=1e-6)
    assert torch.equal(P.bits(q), P.bits(P.saturated(x / s, E4M3)))
    assert float((q.float() * s - x).norm() / x.norm()) < 0.04
    q0, s0 = fp8.quantize_tensorwise(torch.zeros(3), E5M2)
    assert float(s0) == 1.0 and q0.float().abs().sum() == 0


def test_delayed_scaling_uses_the_past_window():
    sc = fp8.DelayedScaler(E4M3, history_len=2)
    amaxes = [1.0, 2.0, 8.0, 1.0, 1.0, 1.0]
    expected = [1.0, 1 / 448, 2 / 448, 8 / 448, 8 / 448, 1 / 448]
    for a, e in zip(amaxes, expected):
        x = torch.tensor([a, -a / 3, a / 7])
        q, s = sc.quantize(x)
        assert math.isclose(float(s), e, rel_tol=1e-7)
        assert torch.equal(P.bits(q), P.bits(P.saturated(x / s, E4M3)))
    assert sc.amax_history == [1.0, 1.0]


def test_mx_scales_are_ocp_powers_of_two_and_block_size_is_honoured():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 128, generator=g) * torch.logspace(-3, 3, 4).repeat_interleave(32)
    for block in (32, 16):
        q, s = fp8.quantize_mx(x, block)
        assert s.shape == (4, 128 // block)
        m, e = torch.frexp(s)
        assert torch.all(m == 0.5)
        amax = x.reshape(4, -1, block).abs().amax(-1)
        assert torch.equal(torch.log2(s), torch.floor(torch.log2(amax)) - 8)
        assert torch.equal(P.bits(q), P.bits(P.saturated(x / s.repeat_interleave(block, -1), E4M3)))
        assert torch.equal(s.to(E8M0).float(), s)
    q, s = fp8.quantize_mx(torch.tensor([[500.0] + [0.0] * 31]), 32)
    assert float(s) == 1.0 and q.float()[0, 0].item() == 448.0                # 500 / 2^0 saturates


def test_outlier_channel_breaks_per_tensor_not_block():
    o = fp8.outlier_channel_errors()
    assert o["tensor"] > 0.3 and o["tensor_underflow"] > 0.5
    assert o["block"] < 0.05 and o["block_underflow"] == 0.0


@pytest.mark.parametrize("block", [None, 32])
def test_matmul_is_the_exact_product_up_to_fp32_accumulation(block):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(8, 64, generator=g), torch.randn(64, 5, generator=g) * 100
    out = fp8.fp8_gemm(a, b, block)
    assert out.dtype == torch.float32
    if block is None:
        (qa, sa), (qb, sb) = fp8.quantize_tensorwise(a), fp8.quantize_tensorwise(b)
    else:
        qa, sa = fp8.quantize_mx(a, block)
        qbt, sbt = fp8.quantize_mx(b.t(), block)
        qb, sb = qbt.t(), sbt.t()
    exact = P.exact_matmul(qa, sa, qb, sb, block)
    assert torch.all((out.double() - exact).abs() <= P.accumulation_bound(qa, sa, qb, sb, block))
    bf = (exact.to(torch.bfloat16).double() - exact).abs()
    assert torch.any(bf > P.accumulation_bound(qa, sa, qb, sb, block))     # a bf16 output would be caught
    assert torch.equal(fp8.fp8_matmul(qa, sa, qb, sb, block), out)


def test_fp8_linear_matches_the_oracle_and_saves_only_fp8():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 16, generator=g, requires_grad=True)
    w = (torch.randn(8, 16, generator=g) * 0.1).requires_grad_(True)
    b = torch.randn(8, generator=g, requires_grad=True)
    gy = torch.randn(2, 3, 8, generator=g) * 1e-4
    with P.SavedForBackward() as saved:
        y = fp8.fp8_linear(x, w, b)
    y.backward(gy)
    o = P.oracle_linear(x.detach(), w.detach(), b.detach(), gy)
    tol = dict(rtol=1e-5, atol=1e-6)
    assert torch.allclose(y.double(), o["y"], **tol)
    assert torch.allclose(x.grad.double(), o["dx"], rtol=1e-5, atol=1e-11)
    assert torch.allclose(w.grad.double(), o["dw"], rtol=1e-5, atol=1e-11)
    assert torch.allclose(b.grad.double(), o["db"], rtol=1e-6)
    assert saved.count(E4M3) == 2 and saved.bytes(torch.float32) <= 8
    e4 = P.oracle_linear(x.detach(), w.detach(), b.detach(), gy, grad_dtype=E4M3)
    assert not torch.allclose(e4["dx"], o["dx"], rtol=1e-3, atol=0)            # e4m3 gradients are distinguishable
    assert (y.double() - (x @ w.t() + b).double()).abs().max() > 1e-3         # it did cast


def test_convert_to_fp8_keeps_master_weights_and_trains_like_bf16():
    m = P.tiny_gpt(0)
    params = [(id(p), p.dtype) for p in m.parameters()]
    idx = m.example_batch(2, 16)
    expected = P.gpt_logits_with(m, idx, P.upstream_fp8_linear)
    fp8.convert_to_fp8(m)
    assert [(id(p), p.dtype) for p in m.parameters()] == params
    with torch.no_grad():
        assert torch.allclose(m(idx), expected, rtol=1e-5, atol=1e-5)
    l8 = P.train_losses(m, 30, seed=5)
    lb = P.train_losses(P.tiny_gpt(0), 30, seed=5, bf16=True)
    assert abs(sum(l8[-5:]) - sum(lb[-5:])) / 5 < 0.05 and l8[-1] < 0.6 * l8[0]
    assert all(p.dtype == torch.float32 for p in m.parameters())
    assert P.on_e4m3_grid(m.blocks[0].fc1.weight) < 0.5                      # master weights are not fp8 values


def test_upstream_copies_agree_with_the_references():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(7, 9, generator=g) * 3
    for dt in (E4M3, E5M2):
        (q1, s1), (q2, s2) = fp8.quantize_tensorwise(x, dt), P.upstream_quantize_tensorwise(x, dt)
        assert torch.equal(P.bits(q1), P.bits(q2)) and float(s1) == float(s2)
    w = torch.randn(4, 9, generator=g)
    assert torch.equal(fp8.fp8_linear(x, w), P.upstream_fp8_linear(x, w))


def test_bench_fp8_meets_its_goals():
    lines = []
    assert fp8.bench_fp8(out=lines.append)
    assert any("outlier channel" in s for s in lines) and any("gap vs bf16" in s for s in lines)


def test_probes_measure_what_the_notebook_says():
    # int_pair: ints of any kind become a tuple of Python ints; anything else comes back as it was
    import numpy as np
    assert P.int_pair((torch.tensor(3), np.int64(2))) == (3, 2) and P.int_pair([1, 0]) == (1, 0)
    assert P.int_pair((3.0, 2)) == (3.0, 2) and P.int_pair((True, 2)) == (True, 2)
    # not_powers_of_two: e8m0 and fp32 powers of two pass, amax / 448 does not
    s = torch.pow(2.0, torch.arange(-10, 10).float())
    assert P.not_powers_of_two(s) == 0 and P.not_powers_of_two(s.to(E8M0)) == 0
    assert P.not_powers_of_two(torch.tensor([3.0, 0.0, -2.0, 1.0])) == 3
    # accumulation_excess: fp32 passes, a bf16 or fp8 output does not
    g = torch.Generator().manual_seed(9)
    qa, qb = P.saturated(torch.randn(8, 64, generator=g) * 40, E4M3), P.saturated(torch.randn(64, 5, generator=g) * 40, E4M3)
    assert P.accumulation_excess(P.upstream_fp8_matmul(qa, 0.5, qb, 2.0), qa, 0.5, qb, 2.0) <= 1
    bf = (qa.to(torch.bfloat16) @ qb.to(torch.bfloat16)).float()
    assert P.accumulation_excess(bf, qa, 1.0, qb, 1.0) > 1
    assert P.accumulation_excess((qa @ qb).float(), qa, 1.0, qb, 1.0) > 1
    assert P.accumulation_excess(torch.full((8, 5), math.inf), qa, 1.0, qb, 1.0) == math.inf
    # SavedForBackward sees the fp8 copies of the course's FP8 linear and no fp32 copies
    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(3, 8, requires_grad=True)
    with P.SavedForBackward() as saved:
        P.upstream_fp8_linear(x, w)
    assert saved.count(E4M3) == 2 and saved.bytes() - saved.bytes(E4M3) <= 8
    with P.SavedForBackward() as saved:
        x @ w.t()
    assert saved.count(E4M3) == 0 and saved.bytes(torch.float32) == 4 * (32 + 24)
    # same_parameters: the very objects, in order
    m = P.tiny_gpt(0)
    before = list(m.parameters())
    assert P.same_parameters(m, before) == len(before)
    assert P.same_parameters(P.tiny_gpt(0), before) == 0
    # on_e4m3_grid: fp8 values are on it, random fp32 weights are not
    q, sc = P.upstream_quantize_tensorwise(torch.randn(64))
    assert P.on_e4m3_grid(q.float() * sc) == 1.0
    assert P.on_e4m3_grid(torch.randn(64)) < 0.1


def test_notebook_reads_as_prose():
    from pathlib import Path

    from solutions_lib.course import notebooks as nbs
    nb = nbs.read(Path(__file__).resolve().parents[1] / "source/12_experts_fp8_triton/exercises_2_fp8.ipynb")
    md = sum(len(c.source.splitlines()) for c in nb.cells if c.cell_type == "markdown")
    tests = sum(len(c.source.splitlines()) for c in nb.cells if nbs.nbgrader_md(c).get("grade"))
    assert md >= tests, (md, tests)
    points = sum(nbs.nbgrader_md(c).get("points", 0) for c in nb.cells)
    assert 10 <= points <= 25
    assert all(c.metadata.get("syllabus") == ["EXT-FP8"] for c in nb.cells if nbs.nbgrader_md(c).get("grade"))
