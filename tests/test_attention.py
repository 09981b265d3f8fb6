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


# ---------------------------------------------------------------- FlashAttention-2: autograd Function

FA2 = A.FlashAttention2


def _qkv(shape_q, s_k=None, d_v=None, dtype=torch.float32, seed=0, requires_grad=True):
    B, h, s_q, d = shape_q
    s_k = s_q if s_k is None else s_k
    d_v = d if d_v is None else d_v
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, h, s_q, d, generator=g, dtype=torch.float64).to(dtype)
    k = torch.randn(B, h, s_k, d, generator=g, dtype=torch.float64).to(dtype)
    v = torch.randn(B, h, s_k, d_v, generator=g, dtype=torch.float64).to(dtype)
    do = torch.randn(B, h, s_q, d_v, generator=g, dtype=torch.float64).to(dtype)
    return [t.requires_grad_(requires_grad) for t in (q, k, v)] + [do]


def _fwd_bwd(fn, q, k, v, do):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o = fn(q, k, v)
    return (o, *torch.autograd.grad(o, (q, k, v), do))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape,s_k,blocks", [((1, 2, 7, 4), None, 3), ((2, 1, 6, 3), 9, (4, 2)),
                                              ((1, 1, 9, 5), 4, 16)])
def test_fa2_gradcheck_float64(shape, s_k, blocks, causal):
    q, k, v, _ = _qkv(shape, s_k, dtype=torch.float64, seed=len(shape) + (s_k or 0))
    assert torch.autograd.gradcheck(lambda a, b, c: FA2.apply(a, b, c, causal, blocks), (q, k, v))


FA2_CASES = [  # (B, h, s_q, d), s_k, d_v, block: sequence lengths that are and are not multiples of the block
    ((2, 3, 64, 16), None, None, 16), ((1, 2, 37, 32), None, None, 16), ((2, 2, 100, 64), None, None, 64),
    ((1, 1, 23, 8), 41, 12, (8, 16)), ((3, 2, 50, 16), 17, None, (32, 8)), ((1, 1, 1, 4), None, None, 64),
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", FA2_CASES)
def test_fa2_forward_and_gradients_match_sdpa_fp32(case, causal):
    shape, s_k, d_v, block = case
    q, k, v, do = _qkv(shape, s_k, d_v, seed=shape[2])
    got = _fwd_bwd(lambda a, b, c: FA2.apply(a, b, c, causal, block), q, k, v, do)
    ref = _fwd_bwd(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), q, k, v, do)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, ref):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    assert FA2.last_stats["backend"] == "torch"


def test_fa2_plain_functions_equal_the_autograd_function():
    q, k, v, do = _qkv((2, 2, 45, 16), dtype=torch.float64, requires_grad=False)
    for causal in (False, True):
        o, lse = A.flash_attention2_forward(q, k, v, causal, 16)
        torch.testing.assert_close(lse, torch.logsumexp(scores(q, k, causal), -1))
        dq, dk, dv = A.flash_attention_backward(q, k, v, o, lse, do, causal=causal, block_size=(8, 32))
        ref = _fwd_bwd(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), q, k, v, do)
        for a, b in zip((o, dq, dk, dv), ref):
            torch.testing.assert_close(a, b)
        # the old forward and the FA2 forward agree
        o1, lse1 = A.flash_attention_forward(q, k, v, 16, causal=causal)
        torch.testing.assert_close(o1, o) and torch.testing.assert_close(lse1, lse)


# bf16: the inputs are rounded to bf16 once; both sides then see the same numbers, and the
# reference is fp32 SDPA on those rounded inputs. bf16 keeps 8 significant bits (unit roundoff
# 2^-8 = 3.9e-3); the outputs and gradients here are O(1) (unit-normal inputs, d = 16..64), so
# rounding the result alone costs up to ~4e-3 absolute. The FA2 path accumulates in fp32 and
# rounds once per output: we allow 2e-2 absolute + 2e-2 relative (~5 bf16 ulps at 1). A path
# that accumulated in bf16 (or rounded P and dS tiles to bf16 along the way) over s >= 100 keys
# exceeds that, as the check against an all-bf16 computation below shows.
BF16_ATOL = BF16_RTOL = 2e-2


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape,block", [((2, 2, 130, 32), 32), ((1, 3, 77, 64), (16, 64))])
def test_fa2_bf16_within_stated_tolerance_of_fp32(shape, block, causal):
    q, k, v, do = _qkv(shape, dtype=torch.bfloat16, seed=7)
    got = _fwd_bwd(lambda a, b, c: FA2.apply(a, b, c, causal, block), q, k, v, do)
    ref = _fwd_bwd(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal),
                   *(t.float() for t in (q, k, v, do)))
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, ref):
        assert a.dtype == torch.bfloat16, name
        torch.testing.assert_close(a.float(), b, rtol=BF16_RTOL, atol=BF16_ATOL, msg=lambda m, n=name: f"{n}: {m}")
    # fp32 accumulation: closer to the fp32 answer than the same tile loops run in bf16 throughout
    o32 = got[0].float()
    with torch.no_grad():
        s = scores(q, k, causal).to(torch.bfloat16)  # bf16 matmul + bf16 softmax + bf16 PV
        o16 = (torch.softmax(s, -1) @ v).float()
    assert (o32 - ref[0]).abs().max() <= (o16 - ref[0]).abs().max()


def test_fa2_fp16_keeps_dtype_and_lse_in_fp32():
    q, k, v, do = _qkv((1, 2, 40, 16), dtype=torch.float16)
    o = FA2.apply(q, k, v, True, 16)
    assert o.dtype == torch.float16
    _, lse = A.flash_attention2_forward(q.detach(), k.detach(), v.detach(), True, 16)
    assert lse.dtype == torch.float32
    o.backward(do)
    assert q.grad.dtype == k.grad.dtype == v.grad.dtype == torch.float16


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_fa2_saves_only_q_k_v_o_and_lse(dtype, causal):
    B, h, s, d = 2, 3, 96, 16
    q, k, v, do = _qkv((B, h, s, d), dtype=dtype)
    packed = []

    def pack(t):
        packed.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        o = FA2.apply(q, k, v, causal, 32)
    # no (s x s) tensor: no saved tensor ends in (s, s) or is as large as one s x s matrix per head
    assert packed and all(tuple(t.shape[-2:]) != (s, s) and t.numel() < B * h * s * s for t in packed)
    assert max(t.numel() for t in packed) == B * h * s * d
    lse_bytes = B * h * s * (8 if dtype == torch.float64 else 4)  # L in the accumulation dtype
    assert sum(t.nbytes for t in packed) == 4 * q.nbytes + lse_bytes
    assert A.saved_tensor_bytes(lambda *a: FA2.apply(*a, causal, 32), q, k, v) == 4 * q.nbytes + lse_bytes
    # naive attention keeps a (B, h, s, s) probability matrix
    assert A.saved_tensor_bytes(A.naive_attention, q, k, v) > B * h * s * s * q.element_size()
    o.backward(do)  # the saved tensors are enough for the backward


@pytest.mark.parametrize("s_q,s_k,block", [(64, 64, 16), (100, 100, 32), (50, 50, (8, 16)), (30, 70, 10)])
def test_fa2_causal_block_skipping_counted(s_q, s_k, block):
    q, k, v, do = _qkv((1, 1, s_q, 4), s_k)
    bq, bk = (block, block) if isinstance(block, int) else block
    nq, nk = math.ceil(s_q / bq), math.ceil(s_k / bk)
    # a tile (i, j) is needed iff its first key j*bk <= its last query min((i+1)*bq, s_q) - 1
    needed = sum(j * bk <= min((i + 1) * bq, s_q) - 1 for i in range(nq) for j in range(nk))
    FA2.apply(q, k, v, True, block).backward(do)
    st = FA2.last_stats
    for phase in ("forward", "backward"):
        assert st[phase] == {"tiles": needed, "skipped": nq * nk - needed}, phase
    assert A.causal_tile_count(s_q, s_k, block) == (needed, nq * nk - needed)
    if s_q == s_k and isinstance(block, int) and s_q % block == 0:
        n = s_q // block
        assert needed == n * (n + 1) // 2  # the lower triangle of tiles, diagonal included
    FA2.apply(q, k, v, False, block)
    assert FA2.last_stats["forward"] == {"tiles": nq * nk, "skipped": 0}


def test_fa2_rejects_bad_input():
    q = torch.randn(1, 2, 5, 4)
    bad = [
        (lambda: FA2.apply(q[0], q[0], q[0]), "4-D"),
        (lambda: FA2.apply(q, torch.randn(1, 2, 5, 3), q), "head dim"),
        (lambda: FA2.apply(q, q, torch.randn(1, 2, 6, 4)), "sequence length"),
        (lambda: FA2.apply(q, torch.randn(2, 2, 5, 4), q), "batch and heads"),
        (lambda: FA2.apply(q.long(), q.long(), q.long()), "floating"),
        (lambda: FA2.apply(q, q.int(), q), "floating"),
        (lambda: FA2.apply(q, q.double(), q), "dtype"),
        (lambda: FA2.apply(q, q, q, "yes"), "causal"),
        (lambda: FA2.apply(q, q, q, False, 0), "block_size"),
        (lambda: FA2.apply(q, q, q, False, (4, 4, 4)), "block_size"),
        (lambda: FA2.apply(q, q, q, False, None, "cuda"), "backend"),
        (lambda: FA2.apply([[1.0]], q, q), "4-D"),
        (lambda: A.flash_attention_backward(q, q, q, q, torch.zeros(1, 2, 4), q), "lse"),
        (lambda: A.flash_attention_backward(q, q, q, q[:, :, :3], torch.zeros(1, 2, 5), q), "o and do"),
        (lambda: A.flash_attention_backward(q, q, q, q, torch.zeros(1, 2, 5), q.long()), "floating"),
        (lambda: A.flash_attention2_forward(q, q, q, scale=0.0), "scale"),
    ]
    for fn, msg in bad:
        with pytest.raises(ValueError, match=msg):
            fn()


# ---------------------------------------------------------------- Triton kernels (CPU interpreter)

# TRITON_INTERPRET=1 must be set before triton is first imported (triton.language's own jit
# helpers are built at import), so the kernels run in a child process on CPU tensors and are
# compared there with the float64 PyTorch path; one child runs every case.
INTERP_CASES = [((1, 2, 37, 16), None, None), ((2, 1, 20, 8), 45, 12), ((1, 1, 40, 32), 16, None)]
# bf16 is not among the dtypes: Triton's interpreter computes tl.dot on bf16 wrongly (numpy has
# no bf16; a 16 x 16 bf16 product comes back as ~1e10); bf16 was checked on an H100 instead
# (docs/attention_bench_2026-11.md).
INTERP_TOL = {"float32": 1e-5, "float16": 3e-3}
INTERP_SCRIPT = r"""
import json, sys, torch, torch.nn.functional as F
from solutions_lib import attention as A, attention_triton as T
cases, res = json.loads(sys.argv[1]), {}
for dt in ("float32", "float16"):
    dtype = getattr(torch, dt)
    for n, ((B, h, sq, d), sk, dv) in enumerate(cases):
        sk, dv = sk or sq, dv or d
        for causal in (False, True):
            g = torch.Generator().manual_seed(3)
            q, k, v, do = (torch.randn(*s, generator=g, dtype=torch.float64).to(dtype)
                           for s in ((B, h, sq, d), (B, h, sk, d), (B, h, sk, dv), (B, h, sq, dv)))
            o, lse = T.flash_attention_forward(q, k, v, causal, block_m=16, block_n=16)
            grads = T.flash_attention_backward(q, k, v, o, lse, do, causal, block_m=16, block_n=32)
            qd, kd, vd, dod = (t.double() for t in (q, k, v, do))
            o_ref, lse_ref = A.flash_attention2_forward(qd, kd, vd, causal, 16)
            ref = A.flash_attention_backward(qd, kd, vd, o_ref, lse_ref, dod, causal, 16)
            ok_dtypes = o.dtype == dtype and lse.dtype == torch.float32 and all(t.dtype == dtype for t in grads)
            errs = [float((a.double() - b).abs().max()) for a, b in zip((o, lse, *grads), (o_ref, lse_ref, *ref))]
            res[f"{dt}-{n}-{causal}"] = {"dtypes_ok": ok_dtypes, "errors": errs}
# the default launch configs (CONFIGS_16: 64-row query tiles, 128-row key tiles in the forward),
# ragged and causal, s_q != s_k: the masked/unmasked split of the kernels at the GPU's tile sizes
for n, (sq, sk) in enumerate(((130, 260), (200, 70))):
    g = torch.Generator().manual_seed(4)
    q, do = (torch.randn(1, 2, sq, 64, generator=g, dtype=torch.float64).half() for _ in range(2))
    k, v = (torch.randn(1, 2, sk, 64, generator=g, dtype=torch.float64).half() for _ in range(2))
    o, lse = T.flash_attention_forward(q, k, v, True)
    grads = T.flash_attention_backward(q, k, v, o, lse, do, True)
    qd, kd, vd, dod = (t.double() for t in (q, k, v, do))
    o_ref, lse_ref = A.flash_attention2_forward(qd, kd, vd, True, 16)
    ref = A.flash_attention_backward(qd, kd, vd, o_ref, lse_ref, dod, True, 16)
    res[f"defaults-{n}"] = [float((a.double() - b).abs().max()) for a, b in zip((o, lse, *grads), (o_ref, lse_ref, *ref))]
# the autograd Function with backend="triton", fp32, causal, against SDPA
q, k, v, do = (torch.randn(1, 2, 24, 16, generator=torch.Generator().manual_seed(5)) for _ in range(4))
qs, ks, vs = (t.clone().requires_grad_() for t in (q, k, v))
out = A.FlashAttention2.apply(qs, ks, vs, True, None, "triton")
got = (out, *torch.autograd.grad(out, (qs, ks, vs), do))
backend = A.FlashAttention2.last_stats["backend"]
qs, ks, vs = (t.clone().requires_grad_() for t in (q, k, v))
ref = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
ref = (ref, *torch.autograd.grad(ref, (qs, ks, vs), do))
res["function"] = {"backend": backend, "errors": [float((a - b).abs().max()) for a, b in zip(got, ref)]}
try:
    A.FlashAttention2.apply(q.double(), k.double(), v.double(), False, None, "triton")
    res["float64_refused"] = False
except ValueError as exc:
    res["float64_refused"] = "fp16, bf16 or fp32" in str(exc)
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def triton_interp_results():
    pytest.importorskip("triton", reason="triton not installed: the Triton kernels are checked where it is")
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", INTERP_SCRIPT, json.dumps(INTERP_CASES)], capture_output=True,
                          text=True, env=env, timeout=600, cwd=os.path.dirname(os.path.dirname(A.__file__)))
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert proc.returncode == 0 and line, f"interpreter run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return json.loads(line[len("RESULT"):])


@pytest.mark.parametrize("dtype", sorted(INTERP_TOL))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", range(len(INTERP_CASES)))
def test_triton_kernels_match_the_torch_path_in_the_interpreter(triton_interp_results, case, causal, dtype):
    r = triton_interp_results[f"{dtype}-{case}-{causal}"]
    assert r["dtypes_ok"], "O and the gradients in the input dtype, L in fp32"
    for name, err in zip(("out", "lse", "dq", "dk", "dv"), r["errors"]):
        assert err <= INTERP_TOL[dtype], f"{name}: max abs error {err:.2e} > {INTERP_TOL[dtype]:.0e} ({INTERP_CASES[case]})"


def test_triton_kernels_with_the_default_launch_configs(triton_interp_results):
    for n in range(2):
        errs = triton_interp_results[f"defaults-{n}"]
        assert max(errs) <= INTERP_TOL["float16"], errs


def test_triton_backend_through_the_autograd_function(triton_interp_results):
    r = triton_interp_results["function"]
    assert r["backend"] == "triton"
    assert max(r["errors"]) <= 1e-5, r["errors"]
    assert triton_interp_results["float64_refused"]


def test_default_backend_on_cpu_is_the_torch_path():
    q, k, v, _ = _qkv((1, 2, 24, 16))
    FA2.apply(q, k, v)
    assert FA2.last_stats["backend"] == "torch"


def test_bench_attention_rows_on_cpu():
    rows = A.attention_benchmark(seq_lens=[64, 128], heads=2, head_dim=16, repeats=1, block_size=32)
    assert {r["method"] for r in rows} == {"naive", "sdpa", "fa2_torch"}  # no Triton row on CPU
    by = {(r["seq_len"], r["method"]): r for r in rows}
    for s in (64, 128):
        assert by[(s, "fa2_torch")]["peak_bytes"] == 4 * 2 * s * 16 * 4 + 2 * s * 4  # q, k, v, O, L
        assert by[(s, "naive")]["peak_bytes"] > 2 * s * s * 4 and by[(s, "fa2_torch")]["ms"] > 0


# ---------------------------------------------------------------- on a GPU (skipped without one)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (checked on an H100: docs/attention_bench_2026-11.md)")
@pytest.mark.parametrize("dtype,tol", [(torch.float16, 5e-3), (torch.bfloat16, 3e-2), (torch.float32, 5e-5)])
@pytest.mark.parametrize("causal", [False, True])
def test_fa2_on_cuda_matches_fp32_sdpa(dtype, tol, causal):
    q, k, v, do = (t.detach().cuda().to(dtype) for t in _qkv((2, 3, 300, 64), seed=11))
    got = _fwd_bwd(lambda a, b, c: FA2.apply(a, b, c, causal), q, k, v, do)
    expected_backend = "torch"
    try:
        from solutions_lib import attention_triton
        expected_backend = "triton" if attention_triton.available() else "torch"
    except ImportError:
        pass
    assert FA2.last_stats["backend"] == expected_backend
    ref = _fwd_bwd(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal),
                   *(t.float() for t in (q, k, v, do)))
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, ref):
        assert a.dtype == dtype
        torch.testing.assert_close(a.float(), b, rtol=tol, atol=tol, msg=lambda m, n=name: f"{n}: {m}")


# ---------------------------------------------------------------- IO complexity (FA1 Theorem 2)
# An independent oracle: the paper's Algorithm 0 and Algorithm 1, run on tensors held in an
# "HBM" object that counts every element loaded from or stored to it. The closed forms of
# solutions_lib.attention must equal the counts exactly, and the outputs must equal torch's.


class HBM:
    """Named tensors in slow memory; load/store count elements moved (slices of rows)."""

    def __init__(self, **tensors):
        self.t = {k: v.clone() for k, v in tensors.items()}
        self.loads = self.stores = 0

    def load(self, name, rows=slice(None)):
        x = self.t[name][rows].clone()
        self.loads += x.numel()
        return x

    def store(self, name, value, rows=slice(None)):
        if name not in self.t:
            self.t[name] = torch.empty_like(value)
        self.t[name][rows] = value
        self.stores += value.numel()

    @property
    def moved(self):
        return self.loads + self.stores


def _algorithm0(q, k, v):
    # Algorithm 0 (standard attention): S, P and O each go through HBM.
    hbm = HBM(Q=q, K=k, V=v)
    hbm.store("S", hbm.load("Q") @ hbm.load("K").T / math.sqrt(q.shape[1]))
    hbm.store("P", torch.softmax(hbm.load("S"), dim=-1))
    hbm.store("O", hbm.load("P") @ hbm.load("V"))
    return hbm.t["O"], hbm.moved


def _algorithm1(q, k, v, sram):
    # Algorithm 1 of Dao et al. 2022 line by line; the SRAM-resident tiles are plain locals.
    n, d = q.shape
    b_c = -(-sram // (4 * d))
    b_r = min(b_c, d)
    hbm = HBM(Q=q, K=k, V=v, O=torch.zeros_like(q), l=torch.zeros(n, dtype=q.dtype),
              m=torch.full((n,), -math.inf, dtype=q.dtype))               # line 2: not counted
    tau = 1 / math.sqrt(d)
    for j0 in range(0, n, b_c):                                           # line 5
        kj, vj = hbm.load("K", slice(j0, j0 + b_c)), hbm.load("V", slice(j0, j0 + b_c))   # line 6
        for i0 in range(0, n, b_r):                                       # line 7
            rows = slice(i0, i0 + b_r)
            qi, oi, li, mi = (hbm.load(x, rows) for x in ("Q", "O", "l", "m"))           # line 8
            s = tau * qi @ kj.T                                           # line 9
            m_t = s.amax(dim=1)                                           # line 10
            p_t = torch.exp(s - m_t[:, None])
            l_t = p_t.sum(dim=1)
            m_new = torch.maximum(mi, m_t)                                # line 11
            l_new = torch.exp(mi - m_new) * li + torch.exp(m_t - m_new) * l_t
            o_new = ((li * torch.exp(mi - m_new))[:, None] * oi + torch.exp(m_t - m_new)[:, None] * (p_t @ vj)) / l_new[:, None]
            hbm.store("O", o_new, rows)                                   # line 12
            hbm.store("l", l_new, rows)                                   # line 13
            hbm.store("m", m_new, rows)
    return hbm.t["O"], hbm.moved


IO_CASES = [(64, 8, 32), (64, 8, 100), (100, 16, 64), (97, 4, 300), (128, 16, 2048), (33, 32, 4096), (200, 8, 32 * 200)]


@pytest.mark.parametrize("n,d,sram", IO_CASES)
def test_hbm_closed_forms_equal_instrumented_algorithms(n, d, sram):
    g = torch.Generator().manual_seed(n * 1000 + d)
    q, k, v = (torch.randn(n, d, generator=g, dtype=torch.float64) for _ in range(3))
    sdpa = F.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None])[0, 0]
    o0, moved0 = _algorithm0(q, k, v)
    o1, moved1 = _algorithm1(q, k, v, sram)
    torch.testing.assert_close(o0, sdpa, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(o1, sdpa, rtol=1e-10, atol=1e-12)
    assert moved0 == A.standard_attention_hbm_bytes(n, d, 1)
    assert moved1 == A.flash_attention_hbm_bytes(n, d, sram, 1)
    for e in (2, 4, 0.5):
        assert A.standard_attention_hbm_bytes(n, d, e) == e * moved0
        assert A.flash_attention_hbm_bytes(n, d, sram, e) == e * moved1


def test_fa1_block_sizes_and_theta_bounds():
    assert A.fa1_block_sizes(64, 51200) == (64, 200)
    assert A.fa1_block_sizes(64, 256) == (1, 1)
    assert A.fa1_block_sizes(8, 1000) == (8, 32)
    # Theorem 2: flash / (N^2 d^2 / M) stays within constants over d <= M <= N d (here M >= 4d)
    for n, d in ((4096, 64), (16384, 128), (1024, 32)):
        for sram in (4 * d, 16 * d, 64 * d, 1024, 8192, 65536, n * d):
            if 4 * d <= sram <= n * d:
                c = A.flash_attention_hbm_bytes(n, d, sram, 1) / (n * n * d * d / sram)
                assert 2 < c < 40, (n, d, sram, c)
    # the ratio standard / flash tends to M / (3 d^2 + 4 d) when N >> d and M is a multiple of 4 d
    n, d, sram = 1 << 20, 64, 4 * 64 * 256
    r = A.standard_attention_hbm_bytes(n, d) / A.flash_attention_hbm_bytes(n, d, sram)
    assert r == pytest.approx(sram / (3 * d * d + 4 * d), rel=1e-3)


def test_io_roofline_on_the_a100_numbers():
    s = A.standard_attention_hbm_bytes(4096, 64, 2)
    f = A.flash_attention_hbm_bytes(4096, 64, 51200, 2)
    assert (s, f) == (136314880, 34766848)
    r = A.attention_io_roofline(4096, 64, s, f, 312e12, 1.555e12)
    assert r["ratio"] == pytest.approx(s / f) and r["flops"] == 4 * 4096 ** 2 * 64
    assert r["intensity_standard"] == pytest.approx(31.5077, rel=1e-5)
    assert r["intensity_flash"] == pytest.approx(123.536, rel=1e-5)
    assert r["ridge"] == pytest.approx(200.643, rel=1e-5)
    assert r["standard_memory_bound"] is True and r["flash_memory_bound"] is True
    big = A.attention_io_roofline(4096, 64, s, A.flash_attention_hbm_bytes(4096, 64, 98304, 2), 312e12, 1.555e12)
    assert big["flash_memory_bound"] is False


@pytest.mark.parametrize("call", [
    lambda: A.standard_attention_hbm_bytes(0, 64), lambda: A.standard_attention_hbm_bytes(64, 2.5),
    lambda: A.standard_attention_hbm_bytes(64, 64, 0), lambda: A.flash_attention_hbm_bytes(64, 64, 255),
    lambda: A.flash_attention_hbm_bytes(64, 64, 4096, -2), lambda: A.flash_attention_hbm_bytes(True, 64, 4096),
    lambda: A.attention_io_roofline(64, 64, 0, 10, 1e12, 1e12), lambda: A.attention_io_roofline(64, 64, 10, 10, 1e12, math.inf)])
def test_io_functions_reject_bad_arguments(call):
    with pytest.raises(ValueError):
        call()
