"""Grouped-query and variable-length (packed) attention (07 exercises_2 Part E): the references in
solutions_lib.attention against independent oracles (torch's SDPA with enable_gqa, SDPA per
sequence), the KV-cache closed form against Llama 2 70B's published shape, and the probes of
solutions_lib.probes_attention: the correct answers pass, the shortcuts (K and V repeated, the
packed row with a block-diagonal mask, padding to the longest) lose."""
import math

import pytest
import torch
import torch.nn.functional as F

from solutions_lib import attention as A
from solutions_lib import probes_attention as pa
from solutions_lib.grading import GradingError

torch.set_num_threads(1)


def _qkv(b, h_q, h_kv, n_q, n_k, d, d_v, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h_q, n_q, d, generator=g, dtype=torch.float64),
            torch.randn(b, h_kv, n_k, d, generator=g, dtype=torch.float64),
            torch.randn(b, h_kv, n_k, d_v, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("shape", [(2, 8, 2, 12, 12, 8, 8), (1, 6, 3, 5, 17, 4, 7), (3, 4, 1, 1, 30, 16, 16),
                                   (1, 4, 4, 9, 9, 8, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_equals_sdpa_with_enable_gqa(shape, causal):
    q, k, v = _qkv(*shape, seed=sum(shape))
    n_q, n_k = shape[3], shape[4]
    mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q) if causal else None
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(A.gqa_attention(q, k, v, causal=causal), want, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(pa.gqa_oracle(q, k, v, causal), want, rtol=1e-12, atol=1e-13)


def test_gqa_never_expands_k_or_v():
    q, k, v = _qkv(1, 12, 3, 1, 64, 32, 32)
    with pa.AttentionProbe() as rec:
        A.gqa_attention(q, k, v, causal=True)
    assert rec.largest <= pa.gqa_bound(1, 12, 3, 1, 64, 32, 32) == 3 * 64 * 32
    assert not rec.called("repeat", "expand", "scaled_dot_product")


def test_kv_cache_bytes_llama2_70b():
    # 80 layers, 64 query heads, 8 KV heads of 128, bf16: 2.5 MiB vs 320 KiB per token
    mha, gqa = A.kv_cache_bytes(1, 1, 80, 64, 8, 128, 2)
    assert (mha, gqa) == (2.5 * 2 ** 20, 320 * 2 ** 10)
    mha, gqa = A.kv_cache_bytes(1, 4096, 80, 64, 8, 128)
    assert (mha, gqa) == (10 * 2 ** 30, 1.25 * 2 ** 30)
    assert A.kv_cache_bytes(2, 3, 1, 4, 1, 5, 4) == (2 * 2 * 3 * 4 * 5 * 4, 2 * 2 * 3 * 1 * 5 * 4)


@pytest.mark.parametrize("args", [(1, 10, 2, 6, 4, 8), (0, 10, 2, 6, 2, 8), (1, 10, 2, 6, 0, 8), (1, 10.5, 2, 6, 2, 8)])
def test_kv_cache_bytes_rejects(args):
    with pytest.raises(ValueError):
        A.kv_cache_bytes(*args)


@pytest.mark.parametrize("lengths", [[5, 17, 9, 30, 3], [1], [1, 1, 1], [40, 7, 7]])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_equals_per_sequence_attention(lengths, causal):
    g = torch.Generator().manual_seed(len(lengths))
    total, h, d, d_v = sum(lengths), 3, 8, 5
    q, k = (torch.randn(total, h, d, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(total, h, d_v, generator=g, dtype=torch.float64)
    cu = torch.tensor([0] + [sum(lengths[:i + 1]) for i in range(len(lengths))], dtype=torch.int32)
    got = A.varlen_attention(q, k, v, cu, causal=causal)
    # independent oracle: the full packed row with a block-diagonal (and causal) mask
    seg = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    allowed = seg[:, None] == seg[None, :]
    if causal:
        allowed &= torch.ones(total, total, dtype=torch.bool).tril()
    want = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                          attn_mask=allowed).transpose(0, 1)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(pa.varlen_oracle(q, k, v, cu.tolist(), causal), want, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(A.varlen_attention(q, k, v, cu.long(), causal=causal), want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("cu", [[0, 5, 3, 8], [1, 4, 8], [0, 4, 7], [0, 4, 4, 8]])
def test_varlen_rejects_bad_cu_seqlens(cu):
    q = torch.randn(8, 2, 4, dtype=torch.float64)
    with pytest.raises(ValueError):
        A.varlen_attention(q, q, q, torch.tensor(cu, dtype=torch.int32))
    with pytest.raises(ValueError):
        A.varlen_attention(q, q, q, torch.tensor([0.0, 8.0]))


# ---------------------------------------------------------------- the probes: right answers pass, shortcuts lose


def _gqa_einsum(q, k, v, causal=False):
    # a correct answer written differently: einsum over (B, H_kv, g, N_q, d), no copy of K or V
    b, h_q, n_q, d = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    q5 = q.view(b, h_kv, h_q // h_kv, n_q, d)
    s = torch.einsum("bhgqd,bhkd->bhgqk", q5, k) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool).triu(1 + n_k - n_q), -math.inf)
    return torch.einsum("bhgqk,bhkd->bhgqd", torch.softmax(s, -1), v).reshape(b, h_q, n_q, v.shape[-1])


def _gqa_repeat(q, k, v, causal=False):
    g = q.shape[1] // k.shape[1]
    return A.gqa_attention(q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1), causal=causal)


def _varlen_packed(q, k, v, cu, causal=False):
    cu = [int(c) for c in cu]
    seg = torch.repeat_interleave(torch.arange(len(cu) - 1), torch.tensor([b - a for a, b in zip(cu, cu[1:])]))
    s = q.transpose(0, 1) @ k.transpose(0, 1).transpose(-1, -2) / math.sqrt(q.shape[-1])
    masked = seg[:, None] != seg[None, :]
    if causal:
        masked |= torch.ones(len(seg), len(seg), dtype=torch.bool).triu(1)
    return (torch.softmax(s.masked_fill(masked, -math.inf), -1) @ v.transpose(0, 1)).transpose(0, 1)


def _varlen_padded(q, k, v, cu, causal=False):
    cu = [int(c) for c in cu]
    lens = [b - a for a, b in zip(cu, cu[1:])]
    n, h = max(lens), q.shape[1]
    pad = [t.new_zeros(len(lens), h, n, t.shape[-1]) for t in (q, k, v)]
    for i, (a, b) in enumerate(zip(cu, cu[1:])):
        for p, t in zip(pad, (q, k, v)):
            p[i, :, :b - a] = t[a:b].transpose(0, 1)
    s = pad[0] @ pad[1].transpose(-1, -2) / math.sqrt(q.shape[-1])
    keep = torch.arange(n)[None, :] < torch.tensor(lens)[:, None]
    masked = ~keep[:, None, None, :]
    if causal:
        masked = masked | torch.ones(n, n, dtype=torch.bool).triu(1)
    o = torch.softmax(s.masked_fill(masked, -math.inf), -1) @ pad[2]
    return torch.cat([o[i, :, :l].transpose(0, 1) for i, l in enumerate(lens)])


def test_probes_pass_correct_answers():
    for cases in ("visible", "hidden"):
        pa.check_gqa(A.gqa_attention, 7701, cases)
        pa.check_gqa(_gqa_einsum, 7702, cases)
        pa.check_varlen(A.varlen_attention, 7711, cases)


@pytest.mark.parametrize("cases", ["visible", "hidden"])
def test_probes_catch_the_shortcuts(cases):
    with pytest.raises(GradingError, match="largest tensor"):
        pa.check_gqa(_gqa_repeat, 7701, cases)
    for wrong in (_varlen_packed, _varlen_padded):
        torch.testing.assert_close(wrong(*[torch.ones(6, 1, 2, dtype=torch.float64)] * 3, torch.tensor([0, 2, 6])),
                                   torch.ones(6, 1, 2, dtype=torch.float64))
        with pytest.raises(GradingError, match="multiply-adds"):
            pa.check_varlen(wrong, 7711, cases)


def test_bench_gqa_varlen_prints_and_checks():
    lines = []
    assert A.bench_gqa_varlen(out=lines.append)
    assert any("10,240.0 MiB" in l and "1,280.0 MiB" in l for l in lines)
    assert any("packed row 4,096, padded 4,500, per sequence 1,304" in l for l in lines)
