"""FlashAttention-2 forward and backward as Triton kernels (the fast path of
solutions_lib.attention.FlashAttention2 on CUDA).

Source: Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work
Partitioning", Algorithm 1 (forward) and Algorithm 2 (backward); the layout follows Triton's
fused-attention tutorial, written out plainly:

- `_fwd_kernel`: one program per (query block of BLOCK_M rows, batch*head); it streams key/value
  blocks of BLOCK_N through the online softmax (running max m, running sum l, unnormalised
  output in fp32), divides once at the end and writes O (input dtype) and L = m + log(l) (fp32).
  Causal: the loop stops at the last key block that touches the diagonal (block skipping).
- `_bwd_preprocess`: D = rowsum(dO * O) in fp32.
- `_bwd_dkdv_kernel`: one program per key block; loops over query blocks (causal: from the first
  one that reaches the diagonal), recomputes P = exp(S - L), accumulates dV += P^T dO and
  dK += scale * dS^T Q with dS = P * (dO V^T - D).
- `_bwd_dq_kernel`: one program per query block; loops over key blocks (causal: up to the
  diagonal) and accumulates dQ += scale * dS K. Two kernels instead of atomics: deterministic.

Matrix products take the input dtype (fp16/bf16 on tensor cores; fp32 with IEEE precision, not
TF32, so fp32 results match torch to ~1e-6), accumulate in fp32; P and dS are cast to the input
dtype before their products, as in the published kernels. Shapes as in attention.py:
q (B, H, s_q, d), k (B, H, s_k, d), v (B, H, s_k, d_v), any s_q, s_k, d, d_v (d, d_v padded to
a power of two >= 16 inside the kernel). Runs on CPU tensors under TRITON_INTERPRET=1 (how the
tests check it without a GPU). `triton` is optional: `available()` is False without it.
"""
from __future__ import annotations

import math

import torch

from .attention import _check_qkv, _check_same_dtype, _scale_for

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - the PyTorch path is used instead
    triton = None
    tl = None

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def available() -> bool:
    return triton is not None


if triton is not None:

    @triton.jit
    def _fwd_kernel(Q, K, V, O, L, sm_scale, S_Q, S_K, D, DV,
                    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
        pid_m = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        offs_dv = tl.arange(0, BLOCK_DV)
        row_ok = rows < S_Q
        q = tl.load(Q + bh * S_Q * D + rows[:, None] * D + offs_d[None, :],
                    mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
        hi = S_K
        if CAUSAL:
            hi = tl.minimum(S_K, (pid_m + 1) * BLOCK_M)  # key blocks past the diagonal: skipped
        for start_n in range(0, hi, BLOCK_N):
            cols = start_n + offs_n
            col_ok = cols < S_K
            k = tl.load(K + bh * S_K * D + cols[:, None] * D + offs_d[None, :],
                        mask=col_ok[:, None] & (offs_d[None, :] < D), other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
            ok = col_ok[None, :] & row_ok[:, None]
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            s = tl.where(ok | ~row_ok[:, None], s, float("-inf"))  # padded rows stay finite
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + bh * S_K * DV + cols[:, None] * DV + offs_dv[None, :],
                        mask=col_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
            m_i = m_new
        o = acc / l_i[:, None]
        tl.store(O + bh * S_Q * DV + rows[:, None] * DV + offs_dv[None, :], o.to(O.dtype.element_ty),
                 mask=row_ok[:, None] & (offs_dv[None, :] < DV))
        tl.store(L + bh * S_Q + rows, m_i + tl.log(l_i), mask=row_ok)

    @triton.jit
    def _bwd_preprocess(O, DO, Delta, S_Q, DV, BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr):
        pid_m = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_dv = tl.arange(0, BLOCK_DV)
        mask = (rows[:, None] < S_Q) & (offs_dv[None, :] < DV)
        ptr = bh * S_Q * DV + rows[:, None] * DV + offs_dv[None, :]
        o = tl.load(O + ptr, mask=mask, other=0.0).to(tl.float32)
        do = tl.load(DO + ptr, mask=mask, other=0.0).to(tl.float32)
        tl.store(Delta + bh * S_Q + rows, tl.sum(o * do, 1), mask=rows < S_Q)

    @triton.jit
    def _bwd_dkdv_kernel(Q, K, V, DO, L, Delta, DK, DVt, sm_scale, S_Q, S_K, D, DV,
                         CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
        pid_n = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_m = tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        offs_dv = tl.arange(0, BLOCK_DV)
        col_ok = cols < S_K
        k = tl.load(K + bh * S_K * D + cols[:, None] * D + offs_d[None, :],
                    mask=col_ok[:, None] & (offs_d[None, :] < D), other=0.0)
        v = tl.load(V + bh * S_K * DV + cols[:, None] * DV + offs_dv[None, :],
                    mask=col_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
        dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
        lo = 0
        if CAUSAL:
            lo = ((pid_n * BLOCK_N) // BLOCK_M) * BLOCK_M  # query blocks wholly before this key block: skipped
        for start_m in range(lo, S_Q, BLOCK_M):
            rows = start_m + offs_m
            row_ok = rows < S_Q
            q = tl.load(Q + bh * S_Q * D + rows[:, None] * D + offs_d[None, :],
                        mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
            do = tl.load(DO + bh * S_Q * DV + rows[:, None] * DV + offs_dv[None, :],
                         mask=row_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
            lse = tl.load(L + bh * S_Q + rows, mask=row_ok, other=0.0)
            delta = tl.load(Delta + bh * S_Q + rows, mask=row_ok, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
            ok = row_ok[:, None] & col_ok[None, :]
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            p = tl.where(ok, tl.exp(tl.where(ok, s - lse[:, None], 0.0)), 0.0)
            dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PRECISION)
            dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
            ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION)
        dk = dk * sm_scale
        tl.store(DK + bh * S_K * D + cols[:, None] * D + offs_d[None, :], dk.to(DK.dtype.element_ty),
                 mask=col_ok[:, None] & (offs_d[None, :] < D))
        tl.store(DVt + bh * S_K * DV + cols[:, None] * DV + offs_dv[None, :], dv.to(DVt.dtype.element_ty),
                 mask=col_ok[:, None] & (offs_dv[None, :] < DV))

    @triton.jit
    def _bwd_dq_kernel(Q, K, V, DO, L, Delta, DQ, sm_scale, S_Q, S_K, D, DV,
                       CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
        pid_m = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        offs_dv = tl.arange(0, BLOCK_DV)
        row_ok = rows < S_Q
        q = tl.load(Q + bh * S_Q * D + rows[:, None] * D + offs_d[None, :],
                    mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
        do = tl.load(DO + bh * S_Q * DV + rows[:, None] * DV + offs_dv[None, :],
                     mask=row_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
        lse = tl.load(L + bh * S_Q + rows, mask=row_ok, other=0.0)
        delta = tl.load(Delta + bh * S_Q + rows, mask=row_ok, other=0.0)
        dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        hi = S_K
        if CAUSAL:
            hi = tl.minimum(S_K, (pid_m + 1) * BLOCK_M)
        for start_n in range(0, hi, BLOCK_N):
            cols = start_n + offs_n
            col_ok = cols < S_K
            k = tl.load(K + bh * S_K * D + cols[:, None] * D + offs_d[None, :],
                        mask=col_ok[:, None] & (offs_d[None, :] < D), other=0.0)
            v = tl.load(V + bh * S_K * DV + cols[:, None] * DV + offs_dv[None, :],
                        mask=col_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
            ok = row_ok[:, None] & col_ok[None, :]
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            p = tl.where(ok, tl.exp(tl.where(ok, s - lse[:, None], 0.0)), 0.0)
            dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
            ds = p * (dp - delta[:, None])
            dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
        dq = dq * sm_scale
        tl.store(DQ + bh * S_Q * D + rows[:, None] * D + offs_d[None, :], dq.to(DQ.dtype.element_ty),
                 mask=row_ok[:, None] & (offs_d[None, :] < D))


def _pad(n: int) -> int:
    return max(16, 1 << (int(n) - 1).bit_length())


def _setup(q, k, v, scale):
    if triton is None:
        raise ValueError("the Triton kernels need the triton package (pip install triton)")
    _check_qkv(q, k, v)
    _check_same_dtype(q=q, k=k, v=v)
    if q.dtype not in DTYPES:
        raise ValueError(f"the Triton kernels take fp16, bf16 or fp32, got {q.dtype}")
    return _scale_for(q, scale), ("ieee" if q.dtype == torch.float32 else "tf32")


def _blocks(dtype, block_m, block_n, fwd):
    big = dtype != torch.float32
    bm = block_m or (128 if (fwd and big) else 64)
    bn = block_n or (64 if big else 32)
    return bm, bn


def flash_attention_forward(q, k, v, causal: bool = False, scale: float | None = None,
                            block_m: int | None = None, block_n: int | None = None):
    """(O, L): O (B, H, s_q, d_v) in q's dtype, L = row logsumexp (B, H, s_q) in fp32 (natural
    log of the scaled scores). Block sizes (powers of two >= 16) default by dtype."""
    scale, prec = _setup(q, k, v, scale)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, H, s_q, d = q.shape
    s_k, dv = k.shape[2], v.shape[-1]
    bm, bn = _blocks(q.dtype, block_m, block_n, fwd=True)
    o = torch.empty(B, H, s_q, dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, s_q, dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(s_q, bm), B * H)
    _fwd_kernel[grid](q, k, v, o, lse, scale, s_q, s_k, d, dv, CAUSAL=bool(causal), BLOCK_M=bm, BLOCK_N=bn,
                      BLOCK_D=_pad(d), BLOCK_DV=_pad(dv), PRECISION=prec, num_warps=4 if bm <= 64 else 8,
                      num_stages=2)
    return o, lse


def flash_attention_backward(q, k, v, o, lse, do, causal: bool = False, scale: float | None = None,
                             block_m: int | None = None, block_n: int | None = None):
    """(dQ, dK, dV) in the input dtype, from the forward's O and L (fp32) and dO."""
    scale, prec = _setup(q, k, v, scale)
    _check_same_dtype(q=q, o=o, do=do)
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.to(torch.float32).contiguous()
    B, H, s_q, d = q.shape
    s_k, dv = k.shape[2], v.shape[-1]
    bm, bn = _blocks(q.dtype, block_m, block_n, fwd=False)
    delta = torch.empty(B, H, s_q, dtype=torch.float32, device=q.device)
    _bwd_preprocess[(triton.cdiv(s_q, bm), B * H)](o, do, delta, s_q, dv, BLOCK_M=bm, BLOCK_DV=_pad(dv))
    dq, dk, dvv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    meta = dict(CAUSAL=bool(causal), BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=_pad(d), BLOCK_DV=_pad(dv), PRECISION=prec,
                num_warps=4, num_stages=2)
    _bwd_dkdv_kernel[(triton.cdiv(s_k, bn), B * H)](q, k, v, do, lse, delta, dk, dvv, scale, s_q, s_k, d, dv, **meta)
    _bwd_dq_kernel[(triton.cdiv(s_q, bm), B * H)](q, k, v, do, lse, delta, dq, scale, s_q, s_k, d, dv, **meta)
    return dq, dk, dvv
