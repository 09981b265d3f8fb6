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

from .attention_inputs import _check_qkv, _check_same_dtype, _scale_for

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
    def _fwd_kernel(Q, K, V, O, L, qk_scale, S_Q, S_K, S_Q_FULL, S_K_FULL,
                    D: tl.constexpr, DV: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr,
                    EVEN_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
        # causal: the longest rows first (the last query blocks hold the most key blocks)
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        offs_dv = tl.arange(0, BLOCK_DV)
        row_ok = rows < S_Q
        q = tl.load(Q + bh * S_Q * D + rows[:, None] * D + offs_d[None, :],
                    mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
        # base-2 online softmax: scores are scaled by sm_scale * log2(e), exp2 replaces exp
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
        k_base = K + bh * S_K * D
        v_base = V + bh * S_K * DV
        # key blocks wholly at or left of the block's first row need no causal mask
        if CAUSAL:
            hi = tl.minimum(S_K, (pid_m + 1) * BLOCK_M)  # key blocks past the diagonal: skipped
            full_stop = tl.minimum(((pid_m * BLOCK_M + 1) // BLOCK_N) * BLOCK_N, hi)
            if not EVEN_N:
                full_stop = tl.minimum(full_stop, S_K_FULL)
        else:
            hi = S_K
            full_stop = S_K_FULL
        for start_n in range(0, full_stop, BLOCK_N):  # no mask at all
            cols = start_n + offs_n
            k = tl.load(k_base + cols[:, None] * D + offs_d[None, :], mask=offs_d[None, :] < D, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.math.exp2(m_i - m_new)
            p = tl.math.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_base + cols[:, None] * DV + offs_dv[None, :], mask=offs_dv[None, :] < DV, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
            m_i = m_new
        for start_n in range(full_stop, hi, BLOCK_N):  # the diagonal blocks and the ragged end: masked
            cols = start_n + offs_n
            col_ok = cols < S_K
            k = tl.load(k_base + cols[:, None] * D + offs_d[None, :],
                        mask=col_ok[:, None] & (offs_d[None, :] < D), other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
            ok = col_ok[None, :] & row_ok[:, None]
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            s = tl.where(ok | ~row_ok[:, None], s, float("-inf"))  # padded rows stay finite
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.math.exp2(m_i - m_new)
            p = tl.math.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_base + cols[:, None] * DV + offs_dv[None, :],
                        mask=col_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
            m_i = m_new
        o = acc / l_i[:, None]
        tl.store(O + bh * S_Q * DV + rows[:, None] * DV + offs_dv[None, :], o.to(O.dtype.element_ty),
                 mask=row_ok[:, None] & (offs_dv[None, :] < DV))
        # L in natural log: (m + log2 l) * ln 2
        tl.store(L + bh * S_Q + rows, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=row_ok)

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
    def _dkdv_step(dk, dv, k, v, q_base, do_base, L, Delta, start_m, cols, col_ok, offs_m, offs_d, offs_dv,
                   qk_scale, S_Q, D: tl.constexpr, DV: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                   PRECISION: tl.constexpr):
        rows = start_m + offs_m
        row_ok = rows < S_Q
        if MASKED:
            q = tl.load(q_base + rows[:, None] * D + offs_d[None, :],
                        mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
            do = tl.load(do_base + rows[:, None] * DV + offs_dv[None, :],
                         mask=row_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
            lse2 = tl.load(L + rows, mask=row_ok, other=0.0) * 1.4426950408889634
            delta = tl.load(Delta + rows, mask=row_ok, other=0.0)
        else:
            q = tl.load(q_base + rows[:, None] * D + offs_d[None, :], mask=offs_d[None, :] < D, other=0.0)
            do = tl.load(do_base + rows[:, None] * DV + offs_dv[None, :], mask=offs_dv[None, :] < DV, other=0.0)
            lse2 = tl.load(L + rows) * 1.4426950408889634
            delta = tl.load(Delta + rows)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        if MASKED:
            ok = row_ok[:, None] & col_ok[None, :]
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            p = tl.where(ok, tl.math.exp2(tl.where(ok, s - lse2[:, None], 0.0)), 0.0)
        else:
            p = tl.math.exp2(s - lse2[:, None])
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION)
        return dk, dv

    @triton.jit
    def _bwd_dkdv_kernel(Q, K, V, DO, L, Delta, DK, DVt, sm_scale, qk_scale, S_Q, S_K, S_Q_FULL, S_K_FULL,
                         D: tl.constexpr, DV: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr,
                         EVEN_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
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
        q_base = Q + bh * S_Q * D
        do_base = DO + bh * S_Q * DV
        l_base = L + bh * S_Q
        d_base = Delta + bh * S_Q
        # Padded key rows (cols >= S_K) need no mask here: they only touch their own dK, dV rows,
        # which are never stored. Padded query rows and the causal diagonal do need one.
        if CAUSAL:
            lo = ((pid_n * BLOCK_N) // BLOCK_M) * BLOCK_M  # query blocks wholly before this key block: skipped
            # query blocks whose first row is at or past the key block's last column need no causal mask
            # (lo <= last column, so the cdiv below counts whole query blocks)
            full_start = tl.minimum(lo + tl.cdiv(pid_n * BLOCK_N + BLOCK_N - 1 - lo, BLOCK_M) * BLOCK_M, S_Q)
            for start_m in range(lo, full_start, BLOCK_M):
                dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, l_base, d_base, start_m, cols, col_ok, offs_m,
                                    offs_d, offs_dv, qk_scale, S_Q, D, DV, True, CAUSAL, PRECISION)
            full_stop = tl.maximum(full_start, S_Q_FULL)
        else:
            full_start = 0
            full_stop = S_Q_FULL
        for start_m in range(full_start, full_stop, BLOCK_M):
            dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, l_base, d_base, start_m, cols, col_ok, offs_m,
                                offs_d, offs_dv, qk_scale, S_Q, D, DV, False, CAUSAL, PRECISION)
        for start_m in range(full_stop, S_Q, BLOCK_M):
            dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, l_base, d_base, start_m, cols, col_ok, offs_m,
                                offs_d, offs_dv, qk_scale, S_Q, D, DV, True, CAUSAL, PRECISION)
        dk = dk * sm_scale
        tl.store(DK + bh * S_K * D + cols[:, None] * D + offs_d[None, :], dk.to(DK.dtype.element_ty),
                 mask=col_ok[:, None] & (offs_d[None, :] < D))
        tl.store(DVt + bh * S_K * DV + cols[:, None] * DV + offs_dv[None, :], dv.to(DVt.dtype.element_ty),
                 mask=col_ok[:, None] & (offs_dv[None, :] < DV))

    @triton.jit
    def _dq_step(dq, q, do, lse2, delta, k_base, v_base, start_n, rows, row_ok, offs_n, offs_d, offs_dv,
                 qk_scale, S_K, D: tl.constexpr, DV: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                 PRECISION: tl.constexpr):
        cols = start_n + offs_n
        col_ok = cols < S_K
        if MASKED:
            k = tl.load(k_base + cols[:, None] * D + offs_d[None, :],
                        mask=col_ok[:, None] & (offs_d[None, :] < D), other=0.0)
            v = tl.load(v_base + cols[:, None] * DV + offs_dv[None, :],
                        mask=col_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
        else:
            k = tl.load(k_base + cols[:, None] * D + offs_d[None, :], mask=offs_d[None, :] < D, other=0.0)
            v = tl.load(v_base + cols[:, None] * DV + offs_dv[None, :], mask=offs_dv[None, :] < DV, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        if MASKED:
            ok = row_ok[:, None] & col_ok[None, :]
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            p = tl.where(ok, tl.math.exp2(tl.where(ok, s - lse2[:, None], 0.0)), 0.0)
        else:
            p = tl.math.exp2(s - lse2[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
        return dq

    @triton.jit
    def _bwd_dq_kernel(Q, K, V, DO, L, Delta, DQ, sm_scale, qk_scale, S_Q, S_K, S_Q_FULL, S_K_FULL,
                       D: tl.constexpr, DV: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr,
                       EVEN_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)
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
        lse2 = tl.load(L + bh * S_Q + rows, mask=row_ok, other=0.0) * 1.4426950408889634
        delta = tl.load(Delta + bh * S_Q + rows, mask=row_ok, other=0.0)
        dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        k_base = K + bh * S_K * D
        v_base = V + bh * S_K * DV
        if CAUSAL:
            hi = tl.minimum(S_K, (pid_m + 1) * BLOCK_M)
            full_stop = tl.minimum(((pid_m * BLOCK_M + 1) // BLOCK_N) * BLOCK_N, hi)
            if not EVEN_N:
                full_stop = tl.minimum(full_stop, S_K_FULL)
        else:
            hi = S_K
            full_stop = S_K_FULL
        for start_n in range(0, full_stop, BLOCK_N):
            dq = _dq_step(dq, q, do, lse2, delta, k_base, v_base, start_n, rows, row_ok, offs_n, offs_d, offs_dv,
                          qk_scale, S_K, D, DV, False, CAUSAL, PRECISION)
        for start_n in range(full_stop, hi, BLOCK_N):
            dq = _dq_step(dq, q, do, lse2, delta, k_base, v_base, start_n, rows, row_ok, offs_n, offs_d, offs_dv,
                          qk_scale, S_K, D, DV, True, CAUSAL, PRECISION)
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


#: Launch settings per kernel for 16-bit inputs: (BLOCK_M, BLOCK_N, num_warps, num_stages);
#: BLOCK_M counts query rows, BLOCK_N key rows. The fastest of 6-8 candidates per kernel at s = 16k
#: (causal bf16, head dim 64) on an H200, `tools/gpu_measure.py --parts attention`
#: (docs/attention_bench_2026-11.md).
CONFIGS_16 = {"fwd": (64, 128, 4, 3), "dkdv": (64, 64, 4, 4), "dq": (64, 128, 4, 3)}
#: fp32 inputs (IEEE products, twice the registers per element): smaller tiles.
CONFIGS_32 = {"fwd": (64, 32, 4, 2), "dkdv": (64, 32, 4, 2), "dq": (64, 32, 4, 2)}
LOG2E = 1.4426950408889634


def _config(kernel, dtype, block_m, block_n):
    bm, bn, warps, stages = (CONFIGS_32 if dtype == torch.float32 else CONFIGS_16)[kernel]
    return block_m or bm, block_n or bn, warps, stages


def _shape_meta(s_q, s_k, d, dv, bm, bn, causal, prec):
    """The kernels' shape arguments: S_Q_FULL, S_K_FULL = the rows covered by whole blocks."""
    return dict(S_Q_FULL=s_q // bm * bm, S_K_FULL=s_k // bn * bn, D=d, DV=dv, CAUSAL=bool(causal),
                EVEN_M=s_q % bm == 0, EVEN_N=s_k % bn == 0, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=_pad(d),
                BLOCK_DV=_pad(dv), PRECISION=prec)


def flash_attention_forward(q, k, v, causal: bool = False, scale: float | None = None,
                            block_m: int | None = None, block_n: int | None = None):
    """(O, L): O (B, H, s_q, d_v) in q's dtype, L = row logsumexp (B, H, s_q) in fp32 (natural
    log of the scaled scores). Block sizes (powers of two >= 16) default to `CONFIGS_16`/`CONFIGS_32`."""
    scale, prec = _setup(q, k, v, scale)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, H, s_q, d = q.shape
    s_k, dv = k.shape[2], v.shape[-1]
    bm, bn, warps, stages = _config("fwd", q.dtype, block_m, block_n)
    o = torch.empty(B, H, s_q, dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, s_q, dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(s_q, bm), B * H)
    _fwd_kernel[grid](q, k, v, o, lse, scale * LOG2E, s_q, s_k, **_shape_meta(s_q, s_k, d, dv, bm, bn, causal, prec),
                      num_warps=warps, num_stages=stages)
    return o, lse


def flash_attention_backward(q, k, v, o, lse, do, causal: bool = False, scale: float | None = None,
                             block_m: int | None = None, block_n: int | None = None):
    """(dQ, dK, dV) in the input dtype, from the forward's O and L (fp32) and dO. `block_m`/`block_n`
    (query rows, key rows) apply to both backward kernels; by default each has its own (`CONFIGS_16`)."""
    scale, prec = _setup(q, k, v, scale)
    _check_same_dtype(q=q, o=o, do=do)
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.to(torch.float32).contiguous()
    B, H, s_q, d = q.shape
    s_k, dv = k.shape[2], v.shape[-1]
    delta = torch.empty(B, H, s_q, dtype=torch.float32, device=q.device)
    _bwd_preprocess[(triton.cdiv(s_q, 64), B * H)](o, do, delta, s_q, dv, BLOCK_M=64, BLOCK_DV=_pad(dv))
    dq, dk, dvv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    bm, bn, warps, stages = _config("dkdv", q.dtype, block_m, block_n)
    _bwd_dkdv_kernel[(triton.cdiv(s_k, bn), B * H)](q, k, v, do, lse, delta, dk, dvv, scale, scale * LOG2E, s_q, s_k,
                                                    **_shape_meta(s_q, s_k, d, dv, bm, bn, causal, prec),
                                                    num_warps=warps, num_stages=stages)
    bm, bn, warps, stages = _config("dq", q.dtype, block_m, block_n)
    _bwd_dq_kernel[(triton.cdiv(s_q, bm), B * H)](q, k, v, do, lse, delta, dq, scale, scale * LOG2E, s_q, s_k,
                                                  **_shape_meta(s_q, s_k, d, dv, bm, bn, causal, prec),
                                                  num_warps=warps, num_stages=stages)
    return dq, dk, dvv
