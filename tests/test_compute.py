"""solutions_lib.compute against FLOPs counted by torch itself (FlopCounterMode) and published numbers."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from solutions_lib import compute as C


class _MatmulGPT(nn.Module):
    """A GPT with bias-free linear layers and attention as explicit matmuls (full s x s scores)."""

    def __init__(self, layers, hidden, heads, vocab):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "qkv": nn.Linear(hidden, 3 * hidden, bias=False), "out": nn.Linear(hidden, hidden, bias=False),
            "up": nn.Linear(hidden, 4 * hidden, bias=False), "down": nn.Linear(4 * hidden, hidden, bias=False),
        }) for _ in range(layers))
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        b, s, h = x.shape
        for blk in self.blocks:
            q, k, v = blk["qkv"](x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(h // self.heads), dim=-1)
            x = x + blk["out"]((att @ v).transpose(1, 2).reshape(b, s, h))
            x = x + blk["down"](torch.nn.functional.gelu(blk["up"](x)))
        return self.head(x)


def _counted_training_flops(batch, seq, layers, hidden, heads, vocab):
    torch.manual_seed(0)
    model = _MatmulGPT(layers, hidden, heads, vocab)
    idx = torch.randint(0, vocab, (batch, seq))
    with FlopCounterMode(display=False) as counter:
        model(idx).sum().backward()
    return counter.get_total_flops(), model


@pytest.mark.parametrize("batch, seq, layers, hidden, heads, vocab",
                         [(2, 16, 2, 32, 4, 50), (3, 24, 3, 48, 6, 97), (1, 64, 1, 16, 2, 11)])
def test_megatron_formula_equals_counted_matmul_flops(batch, seq, layers, hidden, heads, vocab):
    counted, _ = _counted_training_flops(batch, seq, layers, hidden, heads, vocab)
    assert C.megatron_flops_per_iteration(batch, seq, layers, hidden, vocab) == pytest.approx(counted, rel=1e-12)
    # recomputation re-runs the forward of the transformer layers, not of the logit layer:
    # counted forward FLOPs of the whole model minus the head's 2 B s h V
    torch.manual_seed(0)
    model = _MatmulGPT(layers, hidden, heads, vocab)
    with FlopCounterMode(display=False) as fwd:
        model(torch.randint(0, vocab, (batch, seq)))
    layers_forward = fwd.get_total_flops() - 2 * batch * seq * hidden * vocab
    assert C.megatron_flops_per_iteration(batch, seq, layers, hidden, vocab, recompute=True) == \
        pytest.approx(counted + layers_forward, rel=1e-12)


def test_megatron_recompute_is_the_papers_equation_3():
    """Narayanan et al. 2021, eq. (3): F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), and their
    eq. (4) approximation of ~8 T P FLOPs for T tokens on P parameters (GPT-3 175B, Table 1 row:
    h = 12288, l = 96, s = 2048, V = 51200, B = 1536)."""
    B, s, l, h, V = 1536, 2048, 96, 12288, 51200
    paper = 96 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (16 * l * h))
    assert C.megatron_flops_per_iteration(B, s, l, h, V, recompute=True) == pytest.approx(paper, rel=1e-12)
    P = 12 * l * h ** 2 + V * h                        # the paper's parameter count, eq. (2)
    assert P == pytest.approx(175e9, rel=0.01)
    assert paper / (B * s) == pytest.approx(8 * P, rel=0.05)
    # the logit layer is not recomputed: the difference to the no-recompute count is one forward
    # of the transformer layers only, 24 B s l h^2 (1 + s/(6h))
    diff = C.megatron_flops_per_iteration(B, s, l, h, V, recompute=True) - C.megatron_flops_per_iteration(B, s, l, h, V)
    assert diff == pytest.approx(24 * B * s * l * h ** 2 * (1 + s / (6 * h)), rel=1e-12)


def test_palm_flops_per_token_equals_counted_flops_per_token():
    batch, seq, layers, hidden, heads, vocab = 2, 32, 2, 32, 4, 40
    counted, model = _counted_training_flops(batch, seq, layers, hidden, heads, vocab)
    matmul_params = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("emb"))
    per_token = C.palm_flops_per_token(matmul_params, layers, heads, hidden // heads, seq)
    assert per_token * batch * seq == pytest.approx(counted, rel=1e-12)


def test_six_n_d_and_the_seed_examples():
    assert C.training_flops(7e9, 300e9) == pytest.approx(1.26e22)                       # TSX-08
    assert C.mfu(1.0, 60e15, 160e15) == pytest.approx(0.375)                             # TSX-09
    run_seconds = 14 * 86400
    assert C.mfu(300e9 / run_seconds, 6 * 7e9, 512 * 312e12) == pytest.approx(0.06523, rel=1e-3)  # TH-10


def test_hfu_counts_the_recomputed_forward():
    assert C.hfu(1000, 6e9, 1e15, recompute_fraction=1.0) == pytest.approx(C.mfu(1000, 8e9, 1e15))
    assert C.hfu(1000, 6e9, 1e15) == C.mfu(1000, 6e9, 1e15)


def test_roofline_a100_published_numbers():
    assert C.ridge_point(312e12, 2.0e12) == pytest.approx(156.0)
    assert C.gemm_arithmetic_intensity(4096, 4096, 4096) == pytest.approx(4096 / 3)
    assert C.square_gemm_ridge_dim(312e12, 2.0e12) == 468
    d = C.square_gemm_ridge_dim(312e12, 2.0e12)
    assert C.is_compute_bound(C.gemm_arithmetic_intensity(d, d, d), 312e12, 2.0e12)
    assert not C.is_compute_bound(C.gemm_arithmetic_intensity(d - 1, d - 1, d - 1), 312e12, 2.0e12)
    assert C.attainable_flops(10.0, 312e12, 2.0e12) == pytest.approx(20e12)
    assert C.attainable_flops(1e4, 312e12, 2.0e12) == pytest.approx(312e12)


def test_gemm_intensity_from_counted_flops_and_tensor_bytes():
    a, b = torch.randn(64, 96, dtype=torch.float16), torch.randn(96, 40, dtype=torch.float16)
    with FlopCounterMode(display=False) as counter:
        out = torch.mm(a.float(), b.float())
    moved = sum(t.numel() * 2 for t in (a, b, out))
    assert C.gemm_arithmetic_intensity(64, 40, 96) == pytest.approx(counter.get_total_flops() / moved)


@pytest.mark.parametrize("call", [
    lambda: C.training_flops(0, 1e9), lambda: C.training_flops(1e9, -1),
    lambda: C.megatron_flops_per_iteration(0, 1024, 24, 1024, 50000),
    lambda: C.megatron_flops_per_iteration(8, 1024.5, 24, 1024, 50000),
    lambda: C.mfu(1e3, 6e9, 0), lambda: C.gemm_arithmetic_intensity(1, -2, 3),
    lambda: C.ridge_point(312e12, 0), lambda: C.hfu(1, 1, 1, recompute_fraction=2),
    lambda: C.training_flops(float("nan"), 1), lambda: C.training_flops("7e9", 1),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()
