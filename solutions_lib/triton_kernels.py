"""Four Triton kernels a student writes in 12 exercises 3, as references: a fused row softmax, a
tiled matmul with masked ragged edges, a FlashAttention-2 forward and a fused cross-entropy over
vocabulary tiles (loss per row, and its gradient).

Every kernel streams its input in tiles whose size the caller chooses (the BLOCK arguments,
powers of two >= 16); no tl.load or tl.store ever moves more than one tile, so the same code
handles a row of 37 columns or one of 128k. Sources: Triton's tutorials (fused softmax, matmul,
fused attention; https://triton-lang.org/main/getting-started/tutorials/), Milakov & Gimelshein
2018 (online normaliser: one pass for the max and the sum), Dao 2023 (FlashAttention-2,
Algorithm 1: O and the row logsumexp L), and the fused linear cross-entropy of Liger-Kernel
(Hsu et al. 2024), which never materialises the N x V softmax.

- `softmax(x, block_n)`: one program per row; pass 1 keeps a running max and a running sum per
  lane (the sum rescaled by exp(m_old - m_new) whenever the max grows), pass 2 writes
  exp(x - M) / L. Reads x twice, writes y once.
- `matmul(a, b, block_m, block_n, block_k)`: one program per block_m x block_n tile of C, looping
  over K in block_k slices; loads masked at the ragged edges of M, N and K (the masked lanes read
  0, which adds nothing to the dot product), fp32 accumulation.
- `flash_attention(q, k, v, causal, block_m, block_n)`: one program per (query block, batch*head);
  streams key/value blocks through the online softmax with the accumulator rescaled by
  alpha = exp(m_old - m_new), divides once at the end; returns O (input dtype) and L = m + log(l)
  (fp32, natural log of the scaled scores). Causal (query i sees keys j <= i, torch's
  `is_causal=True`): key blocks wholly above the diagonal are skipped.
- `cross_entropy(logits, targets, block_v, ignore_index=-100)`: one program per row; an online
  logsumexp over vocabulary tiles and the target's logit, loss = lse - logit[target] (fp32; 0 for
  ignored rows, as F.cross_entropy(reduction="none")). Reads each logit once.
- `cross_entropy_grad(logits, targets, block_v, ignore_index=-100)`: d(loss.sum())/d(logits) =
  softmax - one_hot(target) (0 for ignored rows), in the logits' dtype: pass 1 the online
  logsumexp, pass 2 writes the gradient tile by tile.

fp32 dot products use IEEE precision (not TF32), so fp32 results match torch to ~1e-6. On CPU
the kernels run in Triton's interpreter: set TRITON_INTERPRET=1 before triton is first imported
(the wrappers refuse CPU tensors otherwise, with that advice). `bench_triton` times them against
torch on CUDA and runs a small correctness pass in the interpreter on CPU.
"""
from __future__ import annotations

import math

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - the notebook and the tests say how to install it
    triton = None
    tl = None

from .probes_triton import dense_attention as torch_attention, interpreter_compat

interpreter_compat()   # triton 3.6's interpreter under numpy >= 2.4 (see probes_triton)

__all__ = ["available", "interpreting", "softmax", "matmul", "flash_attention", "cross_entropy",
           "cross_entropy_grad", "bench_triton"]

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
INSTALL = "the Triton kernels need the triton package: pip install triton (its interpreter runs them on CPU)"


def available() -> bool:
    return triton is not None


def _jit(fn):
    """triton.jit when triton is installed; without it the kernels stay plain functions that the
    wrappers never launch (they raise with INSTALL first). Top-level defs, so the student edition
    can withhold each kernel by name."""
    return triton.jit(fn) if triton is not None else fn


@_jit
def _softmax_kernel(X, Y, n_cols, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    # per-lane running max and sum (the online normaliser); -1e30, not -inf, so a lane that
    # only ever sees masked columns stays at exp(-inf - (-1e30)) = 0 instead of nan
    m = tl.full([BLOCK_N], -1e30, tl.float32)
    l = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offs
        x = tl.load(X + row * stride_x + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        l = l * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_row = tl.max(m, 0)
    l_row = tl.sum(l * tl.exp(m - m_row), 0)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offs
        x = tl.load(X + row * stride_x + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - m_row) / l_row
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=cols < n_cols)

@_jit
def _matmul_kernel(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(A + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(B + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision=PRECISION)
    tl.store(C + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(C.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))

@_jit
def _attention_fwd_kernel(Q, K, V, O, L, sm_scale, S_Q, S_K, D, DV,
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
    m_i = tl.full([BLOCK_M], -1e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    hi = S_K
    if CAUSAL:
        hi = tl.minimum(S_K, (pid_m + 1) * BLOCK_M)  # key blocks wholly above the diagonal: skipped
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < S_K
        k = tl.load(K + bh * S_K * D + cols[:, None] * D + offs_d[None, :],
                    mask=col_ok[:, None] & (offs_d[None, :] < D), other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
        ok = col_ok[None, :] & row_ok[:, None]
        if CAUSAL:
            ok = ok & (cols[None, :] <= rows[:, None])
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + bh * S_K * DV + cols[:, None] * DV + offs_dv[None, :],
                    mask=col_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    o = acc / l_safe[:, None]
    tl.store(O + bh * S_Q * DV + rows[:, None] * DV + offs_dv[None, :], o.to(O.dtype.element_ty),
             mask=row_ok[:, None] & (offs_dv[None, :] < DV))
    tl.store(L + bh * S_Q + rows, m_i + tl.log(l_safe), mask=row_ok)

@_jit
def _ce_fwd_kernel(LOGITS, TARGETS, LOSS, LSE, n_cols, stride, ignore_index, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_V)
    target = tl.load(TARGETS + row).to(tl.int64)
    m = tl.full([BLOCK_V], -1e30, tl.float32)
    l = tl.zeros([BLOCK_V], tl.float32)
    t_logit = tl.zeros([BLOCK_V], tl.float32)
    for start in range(0, n_cols, BLOCK_V):
        cols = start + offs
        x = tl.load(LOGITS + row * stride + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        l = l * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
        t_logit += tl.where(cols == target, x, 0.0)   # the target's logit, picked from the tile it lies in
    m_row = tl.max(m, 0)
    lse = m_row + tl.log(tl.sum(l * tl.exp(m - m_row), 0))
    loss = lse - tl.sum(t_logit, 0)
    loss = tl.where(target == ignore_index, 0.0, loss)
    tl.store(LOSS + row, loss)
    tl.store(LSE + row, lse)

@_jit
def _ce_grad_kernel(LOGITS, TARGETS, GRAD, n_cols, stride, stride_g, ignore_index, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_V)
    target = tl.load(TARGETS + row).to(tl.int64)
    m = tl.full([BLOCK_V], -1e30, tl.float32)
    l = tl.zeros([BLOCK_V], tl.float32)
    for start in range(0, n_cols, BLOCK_V):
        cols = start + offs
        x = tl.load(LOGITS + row * stride + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        l = l * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_row = tl.max(m, 0)
    lse = m_row + tl.log(tl.sum(l * tl.exp(m - m_row), 0))
    keep = tl.where(target == ignore_index, 0.0, 1.0)
    for start in range(0, n_cols, BLOCK_V):
        cols = start + offs
        x = tl.load(LOGITS + row * stride + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        g = (tl.exp(x - lse) - tl.where(cols == target, 1.0, 0.0)) * keep
        tl.store(GRAD + row * stride_g + cols, g.to(GRAD.dtype.element_ty), mask=cols < n_cols)


def interpreting() -> bool:
    """True when triton runs kernels in its interpreter (TRITON_INTERPRET=1 was set before import)."""
    if triton is None:
        return False
    from .probes_triton import interpreting as _interp
    return _interp()


def _need(*tensors):
    if triton is None:
        raise RuntimeError(INSTALL)
    for t in tensors:
        if t.device.type == "cpu" and not interpreting():
            raise RuntimeError("CPU tensors run in Triton's interpreter only: set os.environ['TRITON_INTERPRET'] = '1' "
                               "before triton is first imported (restart the kernel), or pass CUDA tensors")


def _check_block(name: str, b) -> int:
    if isinstance(b, bool) or not isinstance(b, int) or b < 16 or b & (b - 1):
        raise ValueError(f"{name} must be a power of two >= 16 (tl.arange and tl.dot need it), got {b!r}")
    return b


def _check_float(name: str, t) -> None:
    if not isinstance(t, torch.Tensor) or t.dtype not in DTYPES:
        raise ValueError(f"{name} must be a fp16, bf16 or fp32 tensor, got "
                         f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")


def _pad(n: int) -> int:
    return max(16, 1 << (int(n) - 1).bit_length())


def _precision(dtype) -> str:
    return "ieee" if dtype == torch.float32 else "tf32"


def softmax(x: torch.Tensor, block_n: int = 1024) -> torch.Tensor:
    """Row softmax of a 2-D tensor, in x's dtype (computed in fp32), streaming each row in tiles of
    block_n columns: reads x twice, writes y once."""
    _check_float("x", x)
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (rows, cols), got shape {tuple(x.shape)}")
    _check_block("block_n", block_n)
    _need(x)
    if x.stride(-1) != 1:
        x = x.contiguous()
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    rows, cols = x.shape
    if rows and cols:
        _softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK_N=block_n,
                                 num_warps=4 if block_n <= 2048 else 8)
    return y


def matmul(a: torch.Tensor, b: torch.Tensor, block_m: int = 64, block_n: int = 64, block_k: int = 32) -> torch.Tensor:
    """C = A @ B for 2-D A (M, K) and B (K, N) of the same dtype, fp32 accumulation, C in that dtype;
    one program per block_m x block_n tile of C, K in block_k slices, ragged edges masked."""
    _check_float("a", a)
    _check_float("b", b)
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need A (M, K) and B (K, N), got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"A and B must have the same dtype, got {a.dtype} and {b.dtype}")
    for name, blk in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
        _check_block(name, blk)
    _need(a, b)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    if M and N:
        if K == 0:
            return c.zero_()
        grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
        _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                             c.stride(0), c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                             PRECISION=_precision(a.dtype), num_warps=8 if block_m * block_n >= 128 * 128 else 4,
                             num_stages=3)
    return c


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    block_m: int = 64, block_n: int = 64, scale: float | None = None):
    """(O, L) of softmax(q k^T * scale [causal]) v for q (B, H, S_q, d), k (B, H, S_k, d),
    v (B, H, S_k, d_v): O in q's dtype, L (B, H, S_q) fp32 = logsumexp of the scaled scores per row.
    scale defaults to 1/sqrt(d); causal (needs S_q == S_k): query i sees keys j <= i."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_float(name, t)
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (B, H, S, d), got shape {tuple(t.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.shape[:2] != q.shape[:2] or v.shape[:2] != q.shape[:2] or k.shape[3] != q.shape[3] or v.shape[2] != k.shape[2]:
        raise ValueError(f"shapes do not fit: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be a bool, got {causal!r}")
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(f"causal attention needs S_q == S_k (self-attention), got {q.shape[2]} and {k.shape[2]}")
    _check_block("block_m", block_m)
    _check_block("block_n", block_n)
    _need(q, k, v)
    B, H, s_q, d = q.shape
    s_k, dv = k.shape[2], v.shape[3]
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty(B, H, s_q, dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, s_q, dtype=torch.float32, device=q.device)
    if B * H * s_q:
        grid = (triton.cdiv(s_q, block_m), B * H)
        _attention_fwd_kernel[grid](q, k, v, o, lse, float(scale), s_q, s_k, d, dv, CAUSAL=causal,
                                    BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=_pad(d), BLOCK_DV=_pad(dv),
                                    PRECISION=_precision(q.dtype), num_warps=4 if block_m <= 64 else 8,
                                    num_stages=2)
    return o, lse


def _check_ce(logits, targets, block_v):
    _check_float("logits", logits)
    if logits.dim() != 2:
        raise ValueError(f"logits must be 2-D (N, V), got shape {tuple(logits.shape)}")
    if not isinstance(targets, torch.Tensor) or targets.dim() != 1 or targets.shape[0] != logits.shape[0] \
            or targets.dtype not in (torch.int32, torch.int64):
        raise ValueError("targets must be a 1-D int32/int64 tensor with one entry per row of logits, got "
                         f"{getattr(targets, 'dtype', type(targets).__name__)} {tuple(getattr(targets, 'shape', ()))}")
    _check_block("block_v", block_v)
    _need(logits, targets)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, block_v: int = 4096,
                  ignore_index: int = -100) -> torch.Tensor:
    """Loss per row, fp32 (N,): logsumexp(logits[i]) - logits[i, targets[i]], 0 where targets[i] ==
    ignore_index; one program per row reads the row once in tiles of block_v (online logsumexp)."""
    _check_ce(logits, targets, block_v)
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    n, vocab = logits.shape
    loss = torch.empty(n, dtype=torch.float32, device=logits.device)
    lse = torch.empty(n, dtype=torch.float32, device=logits.device)
    if n:
        _ce_fwd_kernel[(n,)](logits, targets.contiguous(), loss, lse, vocab, logits.stride(0), int(ignore_index),
                             BLOCK_V=block_v, num_warps=4 if block_v <= 2048 else 8)
    return loss


def cross_entropy_grad(logits: torch.Tensor, targets: torch.Tensor, block_v: int = 4096,
                       ignore_index: int = -100) -> torch.Tensor:
    """d(cross_entropy(logits, targets).sum()) / d(logits) = softmax(logits) - one_hot(targets),
    rows with targets == ignore_index zero, in logits' dtype; reads the logits twice in tiles."""
    _check_ce(logits, targets, block_v)
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    n, vocab = logits.shape
    grad = torch.empty(n, vocab, dtype=logits.dtype, device=logits.device)
    if n and vocab:
        _ce_grad_kernel[(n,)](logits, targets.contiguous(), grad, vocab, logits.stride(0), grad.stride(0),
                              int(ignore_index), BLOCK_V=block_v, num_warps=4 if block_v <= 2048 else 8)
    return grad


# ---------------------------------------------------------------- oracles and the bench

def _small_checks(device="cpu") -> list[tuple[str, float, float]]:
    """(name, max abs error vs a float64 torch oracle, tolerance) for each kernel on odd shapes."""
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(12)
    out = []
    x = torch.randn(5, 37, generator=g).to(device) * 4
    x[0, 3] = 1000.0
    out.append(("softmax 5x37 (block 16)", float((softmax(x, 16).double() - torch.softmax(x.double(), -1)).abs().max()), 1e-6))
    a, b = torch.randn(37, 29, generator=g).to(device), torch.randn(29, 45, generator=g).to(device)
    out.append(("matmul 37x29 @ 29x45 (16,32,16)",
                float((matmul(a, b, 16, 32, 16).double() - a.double() @ b.double()).abs().max()), 1e-4))
    for causal in (False, True):
        q, k, v = (torch.randn(1, 2, 37, 24, generator=g).to(device) for _ in range(3))
        o, lse = flash_attention(q, k, v, causal, 16, 16)
        o_ref, lse_ref = torch_attention(q, k, v, causal)
        err = max(float((o.double() - o_ref).abs().max()), float((lse.double() - lse_ref).abs().max()))
        out.append((f"flash_attention 1x2x37x24 causal={causal}", err, 1e-5))
    logits = torch.randn(6, 300, generator=g).to(device) * 3
    t = torch.randint(0, 300, (6,), generator=g).to(device)
    t[2] = -100
    ref = F.cross_entropy(logits.double(), t, reduction="none")
    out.append(("cross_entropy 6x300 (block 64)", float((cross_entropy(logits, t, 64).double() - ref).abs().max()), 1e-5))
    ld = logits.double().requires_grad_()
    F.cross_entropy(ld, t, reduction="sum").backward()
    out.append(("cross_entropy_grad 6x300 (block 64)",
                float((cross_entropy_grad(logits, t, 64).double() - ld.grad).abs().max()), 1e-6))
    return out


_CPU_SCRIPT = r"""
import json
from solutions_lib import triton_kernels as T
assert T.interpreting(), "TRITON_INTERPRET was not honoured"
print("RESULT" + json.dumps(T._small_checks("cpu")))
"""


def _cpu_pass(out) -> bool:
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, TRITON_INTERPRET="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", _CPU_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=600, cwd=root)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    if proc.returncode or not line:
        out(f"the interpreter run failed:\n{proc.stderr[-2000:]}")
        return False
    ok = True
    out(f"{'kernel (Triton interpreter, CPU)':44s} {'max abs err':>12s} {'tol':>8s}")
    for name, err, tol in json.loads(line[len("RESULT"):]):
        ok &= err <= tol
        out(f"{name:44s} {err:12.2e} {tol:8.0e} {'ok' if err <= tol else 'FAIL'}")
    out("timings need a GPU: on a CUDA machine bench_triton times each kernel against torch")
    return ok


def _time_ms(fn, repeats: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def _peak_mb(fn) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def bench_triton(out=print) -> bool:
    """On CUDA: each kernel against torch (eager softmax and matmul, SDPA, F.cross_entropy) at a few
    sizes in bf16, median ms of 20 runs, the speed ratio torch_ms / triton_ms (> 1: Triton faster),
    the max error against torch and, for the cross-entropy, the extra memory each allocates.
    On CPU: a small correctness pass in Triton's interpreter (a subprocess with TRITON_INTERPRET=1),
    and a note that timings need a GPU. Returns whether every kernel was within tolerance."""
    if triton is None:
        out(INSTALL)
        return False
    if not torch.cuda.is_available():
        return _cpu_pass(out)
    if interpreting():
        out("TRITON_INTERPRET=1 is set: unset it to time the compiled kernels")
        return _cpu_pass(out)
    import torch.nn.functional as F
    ok = True
    for name, err, tol in _small_checks("cuda"):
        ok &= err <= tol
        out(f"check {name:40s} err {err:.2e} (tol {tol:.0e}) {'ok' if err <= tol else 'FAIL'}")
    dev, dt = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    out(f"device: {torch.cuda.get_device_name()}, dtype bf16, median of 20 runs")
    out(f"{'kernel':14s} {'size':34s} {'torch':>14s} {'torch ms':>9s} {'triton ms':>9s} {'speed x':>8s} {'max err':>9s}")

    def row(kernel, size, ref_name, f_ref, f_tri, err, tol, extra=""):
        nonlocal ok
        t_ref, t_tri = _time_ms(f_ref), _time_ms(f_tri)
        good = err <= tol
        ok &= good
        out(f"{kernel:14s} {size:34s} {ref_name:>14s} {t_ref:9.3f} {t_tri:9.3f} {t_ref / t_tri:8.2f} {err:9.2e}"
            f"{'' if good else ' FAIL'}{extra}")

    for rows, cols, bn in ((4096, 4096, 4096), (4096, 32768, 4096), (1024, 131072, 8192)):
        x = torch.randn(rows, cols, device=dev, generator=g, dtype=dt)
        err = float((softmax(x, bn).float() - torch.softmax(x.float(), -1)).abs().max())
        row("softmax", f"{rows}x{cols} block_n={bn}", "torch.softmax", lambda: torch.softmax(x, -1),
            lambda: softmax(x, bn), err, 2e-2)
        del x
    for n in (1024, 4096, 8192):
        a = torch.randn(n, n, device=dev, generator=g, dtype=dt)
        b = torch.randn(n, n, device=dev, generator=g, dtype=dt)
        ref = (a.float() @ b.float())
        err = float(((matmul(a, b, 128, 128, 64).float() - ref).abs().max()) / ref.abs().max())
        row("matmul", f"{n}x{n}x{n} blocks 128,128,64", "torch.matmul", lambda: a @ b,
            lambda: matmul(a, b, 128, 128, 64), err, 2e-2, " (err relative to max |C|)")
        del a, b, ref
    for s in (1024, 4096, 16384):
        bsz = max(1, 16384 // s)
        for causal in (False, True):
            q, k, v = (torch.randn(bsz, 16, s, 128, device=dev, generator=g, dtype=dt) for _ in range(3))
            o, _ = flash_attention(q, k, v, causal, 128, 64)
            o_ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            err = float((o.float() - o_ref.float()).abs().max())
            row("attention fwd", f"B{bsz} H16 S{s} d128 {'causal' if causal else 'full'}", "SDPA",
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                lambda: flash_attention(q, k, v, causal, 128, 64), err, 3e-2)
            del q, k, v, o, o_ref
    for n, vocab in ((8192, 32000), (8192, 128256)):
        logits = torch.randn(n, vocab, device=dev, generator=g, dtype=dt) * 2
        t = torch.randint(0, vocab, (n,), device=dev, generator=g)
        ref = F.cross_entropy(logits.float(), t, reduction="none")
        err = float((cross_entropy(logits, t, 4096) - ref).abs().max())
        mem = (f" | extra MiB torch {_peak_mb(lambda: F.cross_entropy(logits, t, reduction='none')):.0f}, "
               f"triton {_peak_mb(lambda: cross_entropy(logits, t, 4096)):.1f}")
        row("cross_entropy", f"N{n} V{vocab} block_v=4096", "F.cross_entropy",
            lambda: F.cross_entropy(logits, t, reduction="none"), lambda: cross_entropy(logits, t, 4096), err, 2e-2,
            mem)
        del logits, ref
    out("speed x = torch ms / triton ms (> 1: the Triton kernel is faster); goals: every kernel within tolerance")
    return ok
