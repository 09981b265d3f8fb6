"""solutions_lib.attention against torch: online_softmax vs torch.softmax (including inputs
whose naive exp overflows), the tiled forward vs scaled_dot_product_attention and
torch.logsumexp (causal or not, block sizes that do not divide the sequence), the memory model
vs the tensors autograd really saves and the crossover formula vs a brute-force search."""
import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from solutions_lib import attention as A
from solutions_lib.numerics import TensorOpRecorder

torch.set_num_threads(1)


def scores(q, k, causal, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).triu(1), -math.inf)
    return s


# ---------------------------------------------------------------- online softmax


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 10), (2, 3, 33), (4, 1, 5, 64)])
@pytest.mark.parametrize("block", [1, 3, 8, 100])
def test_online_softmax_equals_torch_softmax(shape, block):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape) + block), dtype=torch.float64) * 5
    torch.testing.assert_close(A.online_softmax(x, block), torch.softmax(x, -1), rtol=1e-12, atol=1e-15)


def test_online_softmax_survives_scores_that_overflow_a_naive_exp():
    x = torch.tensor([[1000.0, 999.0, -1000.0], [-5e4, -5e4 + 1, -5e4 + 2], [88.0, 89.0, 0.0]])
    naive = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)
    assert not torch.isfinite(naive[0]).all()  # exp(1000) = inf in fp32: inf/inf = nan
    torch.testing.assert_close(A.online_softmax(x), torch.softmax(x, -1))
    assert torch.isfinite(A.online_softmax(x)).all()


def test_online_softmax_handles_minus_inf_entries_and_rejects_bad_input():
    x = torch.tensor([[-math.inf, 0.0, 1.0, -math.inf]])
    torch.testing.assert_close(A.online_softmax(x, 1), torch.softmax(x, -1))
    with pytest.raises(ValueError, match="block_size"):
        A.online_softmax(x, 0)
    with pytest.raises(ValueError, match="non-empty"):
        A.online_softmax(torch.zeros(3, 0))


# ---------------------------------------------------------------- tiled forward

CASES = [  # batch, heads, s_q, s_k, d, d_v
    (1, 1, 1, 1, 4, 4), (2, 3, 37, 37, 16, 16), (1, 2, 64, 64, 8, 12), (3, 1, 10, 23, 5, 7), (1, 4, 29, 11, 32, 32),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("block", [1, 5, 8, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_forward_matches_sdpa_and_logsumexp(case, block, causal):
    B, h, sq, sk, d, dv = case
    g = torch.Generator().manual_seed(hash((case, block, causal)) % 2**31)
    q, k, v = torch.randn(B, h, sq, d, generator=g), torch.randn(B, h, sk, d, generator=g), torch.randn(B, h, sk, dv, generator=g)
    out, lse = A.flash_attention_forward(q, k, v, block, causal=causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, torch.logsumexp(scores(q, k, causal), -1), rtol=1e-5, atol=1e-5)
    assert out.shape == (B, h, sq, dv) and lse.shape == (B, h, sq)


def test_flash_forward_custom_scale_and_large_scores():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 19, 8, generator=g) for _ in range(3))
    q = q * 30  # scores of several hundred: exp overflows without the running max
    for scale in (0.05, 1.0, 3.0):
        out, lse = A.flash_attention_forward(q, k, v, 4, scale=scale)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=scale), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lse, torch.logsumexp(scores(q, k, False, scale), -1), rtol=1e-5, atol=1e-4)


def test_flash_forward_never_builds_the_score_matrix_or_calls_softmax():
    q, k, v = (torch.randn(2, 3, 48, 8) for _ in range(3))
    for causal in (False, True):
        with TensorOpRecorder() as rec:
            A.flash_attention_forward(q, k, v, 8, causal=causal)
        assert rec.largest < 2 * 3 * 48 * 48
        assert rec.called("softmax", "scaled_dot_product", "logsumexp") == []
    with TensorOpRecorder() as rec:
        A.naive_attention(q, k, v)
    assert rec.largest == 2 * 3 * 48 * 48 and rec.called("softmax")


def test_flash_forward_rejects_bad_input():
    q = torch.randn(1, 2, 5, 4)
    bad = [
        (lambda: A.flash_attention_forward(q, q, q, 0), "block_size"),
        (lambda: A.flash_attention_forward(q, q, q, 2.5), "block_size"),
        (lambda: A.flash_attention_forward(q[0], q[0], q[0], 2), "4-D"),
        (lambda: A.flash_attention_forward(q, torch.randn(1, 2, 5, 3), q, 2), "head dim"),
        (lambda: A.flash_attention_forward(q, q, torch.randn(1, 2, 6, 4), 2), "sequence length"),
        (lambda: A.flash_attention_forward(q, torch.randn(1, 3, 5, 4), q, 2), "batch and heads"),
        (lambda: A.flash_attention_forward(q, q, q, 2, scale=-1.0), "scale"),
        (lambda: A.flash_attention_forward(q.long(), q, q, 2), "floating"),
    ]
    for fn, msg in bad:
        with pytest.raises(ValueError, match=msg):
            fn()


# ---------------------------------------------------------------- memory model


@pytest.mark.parametrize("B,s,h,d_head,dtype", [(1, 16, 1, 8, torch.float32), (2, 33, 3, 8, torch.float32),
                                                (3, 20, 4, 5, torch.float64)])
def test_standard_saved_bytes_equal_what_autograd_saves(B, s, h, d_head, dtype):
    q, k, v = (torch.randn(B, h, s, d_head, dtype=dtype, requires_grad=True) for _ in range(3))
    bench = A.AttentionBenchmark(B, s, h * d_head, h, torch.finfo(dtype).bits // 8)
    assert A.saved_tensor_bytes(A.naive_attention, q, k, v) == bench.saved_bytes("standard")


def test_flash_saved_bytes_equal_the_tensors_the_forward_keeps():
    B, h, s, dh = 2, 3, 33, 8
    q, k, v = (torch.randn(B, h, s, dh) for _ in range(3))
    out, lse = A.flash_attention_forward(q, k, v, 8)
    kept = sum(t.nbytes for t in (q, k, v, out, lse))
    assert kept == A.AttentionBenchmark(B, s, h * dh, h, 4).saved_bytes("flash")


def test_tensor_lists_add_up_to_the_byte_counts():
    bench = A.AttentionBenchmark(3, 100, 96, 6, 2)
    io, att, row = 3 * 100 * 96, 3 * 6 * 100 ** 2, 3 * 6 * 100
    expected = {("standard", "forward"): 4 * io + 2 * att, ("flash", "forward"): 4 * io + row,
                ("standard", "saved"): 3 * io + att, ("flash", "saved"): 4 * io + row,
                ("standard", "backward"): 7 * io + 3 * att, ("flash", "backward"): 8 * io + 2 * row}
    for (method, phase), n in expected.items():
        assert bench.bytes(method, phase) == 2 * n
        assert sum(bench.tensors(method, phase).values()) == n
    assert bench.forward_bytes("flash") == bench.bytes("flash", "forward")
    assert bench.backward_bytes("standard") == bench.bytes("standard", "backward")
    assert "P" in bench.tensors("standard", "saved") and "lse" in bench.tensors("flash", "saved")


@pytest.mark.parametrize("d,h", [(1536, 24), (512, 8), (64, 1), (768, 12), (4096, 32), (96, 6)])
@pytest.mark.parametrize("phase", A.PHASES)
@pytest.mark.parametrize("target", [2.0, 3.5])
def test_crossover_formula_matches_brute_force(d, h, phase, target):
    brute = next(s for s in itertools.count(1) if A.AttentionBenchmark(1, s, d, h).savings_ratio(phase) > target)
    assert A.crossover_seq_len(d, h, phase, target) == brute
    assert A.AttentionBenchmark(5, 10, d, h).crossover_seq_len(phase, target) == brute


def test_crossover_closed_forms_and_the_climate_model():
    for d, h in [(1536, 24), (1024, 16), (960, 10)]:
        assert A.crossover_threshold(d, h, "backward") == pytest.approx(3 * d / h + 4 / 3)
        assert A.crossover_threshold(d, h, "saved") == pytest.approx(5 * d / h + 2)
        assert A.crossover_threshold(d, h, "forward") == pytest.approx(2 * d / h + 1)
    climate = A.AttentionBenchmark(1, 2048, 1536, 24)
    assert climate.crossover_seq_len() == 194
    assert climate.savings_ratio("backward") == pytest.approx(103 / (8 + 2 / 64))
    assert climate.savings_ratio("saved") == pytest.approx(35 / (4 + 1 / 64))
    assert climate.savings_ratio("forward") == pytest.approx(68 / (4 + 1 / 64))
    # the ratio does not depend on the batch or on bytes per element
    assert A.AttentionBenchmark(7, 2048, 1536, 24, 4).savings_ratio() == pytest.approx(climate.savings_ratio())


def test_benchmark_rejects_bad_input():
    for args in [(0, 10, 64, 4), (1, 10, 65, 4), (1, -1, 64, 4), (1, 10, 64, 4, 0), (1.5, 10, 64, 4)]:
        with pytest.raises(ValueError):
            A.AttentionBenchmark(*args)
    bench = A.AttentionBenchmark(1, 10, 64, 4)
    with pytest.raises(ValueError, match="method"):
        bench.bytes("sparse", "forward")
    with pytest.raises(ValueError, match="phase"):
        bench.savings_ratio("sideways")
    with pytest.raises(ValueError, match="target"):
        A.crossover_seq_len(64, 4, "backward", 1.0)


# ---------------------------------------------------------------- saturation


def test_score_saturation_with_and_without_the_scale():
    rng = np.random.default_rng(0)
    d = 256
    q, k = rng.standard_normal((300, d)), rng.standard_normal((300, d))
    raw, scaled = A.score_saturation(q, k, scaled=False), A.score_saturation(q, k, scaled=True)
    assert raw["score_std"] == pytest.approx(math.sqrt(d), rel=0.05)
    assert scaled["score_std"] == pytest.approx(1.0, rel=0.05)
    assert raw["max_prob"] > 0.5 > 0.05 > scaled["max_prob"]
    assert scaled["entropy"] > raw["entropy"] and scaled["entropy"] < math.log(300)
    # the numbers equal a direct computation with torch.softmax
    s = torch.as_tensor(q) @ torch.as_tensor(k).T / math.sqrt(d)
    p = torch.softmax(s, -1)
    assert scaled["max_prob"] == pytest.approx(float(p.max(-1).values.mean()), rel=1e-12)
    sweep = A.saturation_sweep([4, 64, 1024], n_q=64, n_k=64)
    assert np.all(np.diff(sweep["max_prob_unscaled"]) > 0)
    assert np.allclose(sweep["std_scaled"], 1.0, rtol=0.15)
    with pytest.raises(ValueError):
        A.score_saturation(q, k[:, :10])
