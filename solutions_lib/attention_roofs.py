"""Attention's third roof: the exponentials of the softmax (07 exercises 2, Exercise D4).

A roofline with two roofs (matmul FLOPs / peak, bytes / bandwidth) misses what limits a
FlashAttention kernel once its traffic is cut: every score needs one exponential, and the GPU's
special-function units (SFUs) compute far fewer of those per second than its tensor cores do
matmul FLOPs. Shah et al. 2024 (*FlashAttention-3*, sec. 3.1, "Pingpong scheduling"): an H100 SXM5
does 989 TFLOP/s of dense FP16/BF16 matmul but only 3.9 TFLOP/s of special functions (16 per SM per
clock x 132 SMs x 1.83 GHz); at head dimension 128 there are 512x more matmul FLOPs than
exponentials, at 256x the throughput, so the exponentials take half as long as the matmuls.

One head's forward pass, `seq_len` = N queries and keys, head dimension d:
    scores S      N^2, or N (N + 1) / 2 with a causal mask (query i sees keys j <= i)
    matmul        4 d S FLOPs (Q K^T and P V, 2 d per score each) / peak_flops
    memory        hbm_bytes / bandwidth (the caller's byte count: D1, D2 or any)
    exp           S exponentials / exp_per_second (the online softmax's per-row rescaling
                  factors, N per key block, are left out)
    time          the largest of the three; "bound" names it, ties to the first of
                  ("matmul", "memory", "exp") (at the ridge a kernel is not memory-bound, as in D3)
The exponential roof is above the matmul roof iff 4 d / F < 1 / E, i.e. d < F / (4 E), whatever N
and the mask: `largest_exp_bound_head_dim` is the largest whole d below F / (4 E) (63 on an H100 in
BF16, 126 in FP8 at 1979 TFLOP/s).
"""
from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["ROOFS", "attention_time_roofs", "largest_exp_bound_head_dim", "bench_exp_roof"]

ROOFS = ("matmul", "memory", "exp")
H100_SXM = dict(bf16=989e12, fp8=1979e12, exp=3.9e12, bandwidth=3.35e12)   # dense; FA3 sec. 3.1; H100 datasheet


def _whole(name, value):
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())) \
            or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return int(value)


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def attention_time_roofs(seq_len, head_dim, hbm_bytes, peak_flops, bandwidth, exp_per_second, causal=False) -> dict:
    """{"matmul", "memory", "exp", "time", "bound", "scores"}: seconds of each roof for one head's
    forward pass, the largest, and which roof it is (see the module docstring)."""
    n, d = _whole("seq_len", seq_len), _whole("head_dim", head_dim)
    for name, value in (("hbm_bytes", hbm_bytes), ("peak_flops", peak_flops), ("bandwidth", bandwidth),
                        ("exp_per_second", exp_per_second)):
        _positive(name, value)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    scores = n * (n + 1) // 2 if causal else n * n
    out = {"matmul": 4.0 * d * scores / peak_flops, "memory": hbm_bytes / bandwidth, "exp": scores / exp_per_second}
    out["time"] = max(out[k] for k in ROOFS)
    out["bound"] = next(k for k in ROOFS if out[k] == out["time"])
    out["scores"] = scores
    return out


def largest_exp_bound_head_dim(peak_flops, exp_per_second) -> int:
    """The largest whole head dimension d whose exponentials take strictly longer than its matmuls,
    d < F / (4 E) (exactly, on the floats given); 0 when even d = 1 is matmul-bound."""
    F, E = Fraction(_positive("peak_flops", peak_flops)), Fraction(_positive("exp_per_second", exp_per_second))
    return max(0, math.ceil(F / (4 * E)) - 1)


def bench_exp_roof(out=print) -> bool:
    """The three roofs of one head's causal forward on an H100 SXM (BF16 and FP8) for d = 64 and 128
    at N = 8192, with FlashAttention's traffic taken as 4 N d elements (Q, K, V, O once each)."""
    h = H100_SXM
    ok = True
    for fmt, peak, e in (("bf16", h["bf16"], 2), ("fp8", h["fp8"], 1)):
        dstar = largest_exp_bound_head_dim(peak, h["exp"])
        out(f"H100 SXM {fmt}: the exponential roof binds for d <= {dstar} (F / 4E = {peak / (4 * h['exp']):.1f})")
        for d in (64, 128):
            r = attention_time_roofs(8192, d, 4 * 8192 * d * e, peak, h["bandwidth"], h["exp"], causal=True)
            out(f"  d = {d:3d}: matmul {r['matmul'] * 1e6:6.1f} us, memory {r['memory'] * 1e6:5.1f} us, "
                f"exp {r['exp'] * 1e6:6.1f} us -> {r['bound']}")
            ok = ok and r["bound"] == ("exp" if d <= dstar else "matmul")
    return ok
