"""Training compute: FLOPs per run, per iteration and per token, MFU and HFU, the roofline.

Units: FLOPs (floating-point operations, a multiply-add counts 2), FLOP/s, bytes, seconds.
"""
from __future__ import annotations

import math

from ._checks import fraction, non_negative, positive

__all__ = ["training_flops", "megatron_flops_per_iteration", "palm_flops_per_token", "mfu", "hfu",
           "gemm_arithmetic_intensity", "ridge_point", "attainable_flops", "is_compute_bound",
           "square_gemm_ridge_dim"]


def training_flops(n_params: float, n_tokens: float) -> float:
    """C = 6 N D: FLOPs to train N parameters on D tokens.

    2 N FLOPs per token forward (a multiply-add per weight) and 4 N backward (gradients with
    respect to activations and to weights). Kaplan et al. 2020, section 2.1; it leaves out
    attention's sequence-length term (see `palm_flops_per_token`).
    """
    positive("n_params", n_params)
    non_negative("n_tokens", n_tokens)
    return 6.0 * n_params * n_tokens


def megatron_flops_per_iteration(batch: int, seq_len: int, layers: int, hidden: int, vocab: int,
                                 recompute: bool = False) -> float:
    """FLOPs of one training iteration of a GPT: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).

    Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters using
    Megatron-LM"), section 5.1: per layer the forward matmuls cost 24 B s h^2 (QKV, output
    projection, a 4h MLP) plus 4 B s^2 h (scores and weighted values); the logit layer costs
    2 B s h V; backward costs twice the forward. With full activation recomputation
    (`recompute=True`) the *transformer layers* run their forward twice, the logit layer does
    not: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), the paper's equation (3), which counts hardware
    FLOPs (the logit term is the same 6 B s h V in both). Only matmuls are counted; the
    attention term is the full s x s score matrix (a causal kernel that skips masked blocks does
    about half of it).
    """
    for name, v in (("batch", batch), ("seq_len", seq_len), ("layers", layers), ("hidden", hidden),
                    ("vocab", vocab)):
        positive(name, v, integer=True)
    b, s, l, h, V = (float(x) for x in (batch, seq_len, layers, hidden, vocab))
    if recompute:
        return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h))
    return 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h))


def palm_flops_per_token(n_params: float, layers: int, heads: int, head_dim: int, seq_len: int) -> float:
    """Model FLOPs per token: 6 N + 12 L H Q T (Chowdhery et al. 2022, PaLM, appendix B).

    N: non-embedding parameters; L layers, H heads of size Q, sequence length T. The second
    term is attention's score and value matmuls, forward and backward.
    """
    positive("n_params", n_params)
    for name, v in (("layers", layers), ("heads", heads), ("head_dim", head_dim), ("seq_len", seq_len)):
        positive(name, v, integer=True)
    return 6.0 * n_params + 12.0 * layers * heads * head_dim * seq_len


def mfu(tokens_per_second: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: tokens/s * model FLOPs per token / peak FLOP/s (PaLM, appendix B).

    Model FLOPs exclude recomputation: re-running a forward to save memory does not count as
    useful work. Use `hfu` with the hardware FLOPs per token to count it.
    """
    non_negative("tokens_per_second", tokens_per_second)
    positive("flops_per_token", flops_per_token)
    positive("peak_flops", peak_flops)
    return tokens_per_second * flops_per_token / peak_flops


def hfu(tokens_per_second: float, flops_per_token: float, peak_flops: float,
        recompute_fraction: float = 0.0) -> float:
    """Hardware FLOPs utilisation: counts recomputed forward FLOPs as well.

    With a share `recompute_fraction` of the forward recomputed (1.0 = full recomputation),
    the hardware runs (6 + 2 r)/6 times the model FLOPs: HFU = MFU (1 + r/3).
    """
    fraction("recompute_fraction", recompute_fraction)
    return mfu(tokens_per_second, flops_per_token, peak_flops) * (1.0 + recompute_fraction / 3.0)


def gemm_arithmetic_intensity(m: int, n: int, k: int, bytes_per_element: float = 2) -> float:
    """FLOP per byte of C = A B with A (m x k), B (k x n): 2 m n k / (b (m k + k n + m n)).

    Each operand is read once and C written once (the ideal traffic, perfect reuse in cache).
    Square, fp16 (b = 2): 2 d^3 / (6 d^2) = d / 3.
    """
    for name, v in (("m", m), ("n", n), ("k", k)):
        positive(name, v, integer=True)
    positive("bytes_per_element", bytes_per_element)
    return 2.0 * m * n * k / (bytes_per_element * (m * k + k * n + m * n))


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """Arithmetic intensity (FLOP/byte) where the roofline's two roofs meet: peak / bandwidth.

    A100: 312e12 / 2.0e12 = 156 FLOP/byte (Williams et al. 2009, "Roofline").
    """
    positive("peak_flops", peak_flops)
    positive("bandwidth", bandwidth)
    return peak_flops / bandwidth


def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """Roofline: min(peak, intensity * bandwidth) in FLOP/s."""
    positive("intensity", intensity)
    return min(ridge_point(peak_flops, bandwidth) * bandwidth, intensity * bandwidth)


def is_compute_bound(intensity: float, peak_flops: float, bandwidth: float) -> bool:
    """True when the intensity reaches the ridge point (at the ridge both roofs are equal)."""
    positive("intensity", intensity)
    return intensity >= ridge_point(peak_flops, bandwidth)


def square_gemm_ridge_dim(peak_flops: float, bandwidth: float, bytes_per_element: float = 2) -> int:
    """Smallest d for which a d x d x d GEMM is compute bound: d / (3 b / 2) >= ridge.

    Intensity of a square GEMM is 2 d / (3 b); A100 fp16: d >= 3 * 156 = 468.
    """
    positive("bytes_per_element", bytes_per_element)
    ridge = ridge_point(peak_flops, bandwidth)
    d = math.ceil(1.5 * bytes_per_element * ridge - 1e-9)
    return max(d, 1)

