"""Argument checks shared by the attention reference (attention.py) and its Triton fast path
(attention_triton.py): a leaf module, so neither has to import the other for them."""
from __future__ import annotations

import math
from numbers import Real

import torch


def _check_qkv(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.ndim != 4:
            raise ValueError(f"{name} must be a 4-D tensor (batch, heads, seq, dim), got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(f"batch and heads must match: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same head dim, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v need the same sequence length, got {k.shape[2]} and {v.shape[2]}")
    if min(q.shape[2], k.shape[2], q.shape[-1]) < 1:
        raise ValueError("sequence lengths and head dim must be >= 1")


def _scale_for(q, scale) -> float:
    if scale is None:
        return 1.0 / math.sqrt(q.shape[-1])
    if isinstance(scale, bool) or not isinstance(scale, Real) or not math.isfinite(float(scale)) or scale <= 0:
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    return float(scale)


def _check_same_dtype(**tensors):
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        raise ValueError("q, k, v (and o, do) must share one dtype, got "
                         + ", ".join(f"{n}={t.dtype}" for n, t in tensors.items()))
