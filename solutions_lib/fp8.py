"""FP8 training emulated on a CPU with torch's float8 dtypes (issue 29, EXT-FP8).

Reference answers of 12 exercises 2 ("FP8 training"). Every number here is an fp8 *value*
held in a real torch float8 tensor; the arithmetic around it (scaling, accumulation) runs in
fp32, which is what an FP8 tensor core does (fp8 operands, fp32 accumulator).

Formats (Micikevicius et al. 2022, "FP8 Formats for Deep Learning", arXiv:2209.05433; the OCP
8-bit floating point spec v1.0, 2023). A value with sign s, biased exponent E and mantissa M
(m mantissa bits, bias b) is (-1)^s 2^(E-b) (1 + M/2^m) for E > 0 and (-1)^s 2^(1-b) M/2^m for
E = 0 (subnormal):

    format            bits (e, m)  bias  max normal            min normal  min subnormal  specials
    float8_e4m3fn     4, 3         7     2^8 * 1.75  = 448     2^-6        2^-9           NaN = S.1111.111, no inf
    float8_e5m2       5, 2         15    2^15 * 1.75 = 57344   2^-14       2^-16          IEEE-like: inf, NaN
    float8_e8m0fnu    8, 0         127   2^127                 2^-127      (none)         NaN = 0xFF, no sign, no zero

e4m3 keeps one more mantissa bit (relative step 2^-3) for forward tensors (activations,
weights); e5m2 keeps range (2^-16 .. 57344) for gradients. e8m0 is a pure power of two: the
shared block scale of the OCP Microscaling (MX) formats v1.0 (2023).

What torch 2.13 does on a CPU (measured, tests/test_fp8.py): `.to(float8_e4m3fn)` rounds to
nearest even and *saturates* (|x| > 448 and +-inf become +-448; NaN stays NaN);
`.to(float8_e5m2)` rounds to nearest even and overflows to +-inf (|x| >= 61440); `.to(
float8_e8m0fnu)` rounds the exponent (1.5 -> 2, 3 -> 4), drops the sign and maps 0 to 2^-127.
Elementwise arithmetic (add, abs, max) is not implemented for float8 tensors; `@` and
`torch._scaled_mm` are. Every cast here therefore clamps first, so it saturates in every format.

Scaling (x ~= q * scale, q the fp8 tensor):
- per-tensor *current* scaling: scale = amax(x) / max_fp8, q = cast(x / scale);
- *delayed* scaling (NVIDIA Transformer Engine, `DelayedScaling` recipe): the scale of step t
  comes from the amax history of the previous `history_len` steps,
  scale_t = max(amax_{t-h} .. amax_{t-1}) / max_fp8 (TE's scale_inv; TE stores 1/scale and a
  margin), so a tensor larger than its history saturates;
- *block* (MX) scaling, OCP MX v1.0 section 6.3: per block of k = 32 consecutive elements along
  the last dim, X = 2^(floor(log2 amax_block) - emax_elem) (emax_elem = 8 for e4m3, 15 for e5m2,
  the exponent of the largest normal), q = cast(x / X) with saturation (amax / X lies in
  [2^8, 2^9), so up to 511 / 448 of the block max may clip).

The FP8 linear layer (`FP8LinearFunction`): forward y = (q_x q_w^T) s_x s_w + b with x and w in
e4m3, fp32 accumulation; it saves only the fp8 tensors and their scales for the backward;
backward quantises dY to e5m2 and computes dX = (q_g q_w) s_g s_w, dW = (q_g^T q_x) s_g s_x, and
db = sum of the fp32 dY. The parameters (master weights) and the optimizer state stay fp32.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["DelayedScaler", "FP8LinearFunction", "bench_fp8", "cast_counts", "convert_to_fp8", "dequantize_mx",
           "fp8_cast", "fp8_gemm", "fp8_limits", "fp8_linear", "fp8_matmul", "outlier_channel_errors", "quantize_mx",
           "quantize_tensorwise", "train_compare"]

_BITS = {torch.float8_e4m3fn: (4, 3), torch.float8_e5m2: (5, 2)}


def _check_dtype(dtype) -> None:
    if dtype not in _BITS:
        raise ValueError(f"dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype!r}")


def _check_tensor(x, name: str = "x") -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dtype in _BITS:
        raise ValueError(f"{name} must be a floating-point tensor (fp32/bf16/fp16/fp64), got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if torch.isnan(x).any():
        raise ValueError(f"{name} contains NaN")


def fp8_limits(dtype) -> dict:
    """Closed forms of an fp8 format: bias 2^(e-1) - 1; max normal 2^(2^e - 1 - bias) (2 - 2^(1-m))
    for e4m3fn (top exponent used, only S.1111.111 is NaN) and 2^(2^e - 2 - bias) (2 - 2^-m) for
    e5m2 (top exponent reserved); min normal 2^(1 - bias); min subnormal 2^(1 - bias - m);
    eps = 2^-m (Micikevicius et al. 2022, table 1)."""
    _check_dtype(dtype)
    e, m = _BITS[dtype]
    bias = 2 ** (e - 1) - 1
    if dtype == torch.float8_e4m3fn:
        max_normal = 2.0 ** (2 ** e - 1 - bias) * (2 - 2.0 ** (1 - m))
    else:
        max_normal = 2.0 ** (2 ** e - 2 - bias) * (2 - 2.0 ** -m)
    return {"max_normal": max_normal, "min_normal": 2.0 ** (1 - bias), "min_subnormal": 2.0 ** (1 - bias - m),
            "eps": 2.0 ** -m, "bias": bias, "emax": int(math.floor(math.log2(max_normal)))}


def fp8_cast(x: torch.Tensor, dtype) -> torch.Tensor:
    """Saturating cast to an fp8 dtype: clamp to [-max, max] (inf included), round to nearest even."""
    _check_dtype(dtype)
    _check_tensor(x)
    fmax = fp8_limits(dtype)["max_normal"]
    return x.float().clamp(-fmax, fmax).to(dtype)


def cast_counts(x: torch.Tensor, dtype) -> tuple[int, int]:
    """(overflow, underflow) of a saturating cast: overflow = #{|x| > max normal} (saturated),
    underflow = #{x != 0 whose cast is 0} (|x| <= min_subnormal / 2, ties to even)."""
    q = fp8_cast(x, dtype).float()
    fmax = fp8_limits(dtype)["max_normal"]
    xf = x.float()
    return int((xf.abs() > fmax).sum()), int(((xf != 0) & (q == 0)).sum())


def quantize_tensorwise(x: torch.Tensor, dtype=torch.float8_e4m3fn) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor current scaling: scale = amax / max_fp8 (fp32; 1 for an all-zero x), q = cast(x / scale)."""
    _check_dtype(dtype)
    _check_tensor(x)
    xf = x.float()
    amax = xf.abs().max() if xf.numel() else torch.tensor(0.0)
    scale = amax / fp8_limits(dtype)["max_normal"] if amax > 0 else torch.tensor(1.0)
    scale = scale.float()
    return fp8_cast(xf / scale, dtype), scale


class DelayedScaler:
    """Delayed scaling with an amax history (Transformer Engine's DelayedScaling, "max" algorithm).

    `quantize(x)` returns (q, scale) with scale = max(last `history_len` amaxes before x) / max_fp8
    (1.0 while the history is empty or all zero), q = fp8_cast(x / scale); then x's amax joins the
    history (the oldest entry leaves once there are `history_len`)."""

    def __init__(self, dtype=torch.float8_e4m3fn, history_len: int = 16):
        _check_dtype(dtype)
        if isinstance(history_len, bool) or not isinstance(history_len, int) or history_len < 1:
            raise ValueError(f"history_len must be a whole number >= 1, got {history_len!r}")
        self.dtype, self.history_len = dtype, history_len
        self.amax_history: list[float] = []

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _check_tensor(x)
        xf = x.float()
        past = max(self.amax_history, default=0.0)
        scale = torch.tensor(past / fp8_limits(self.dtype)["max_normal"] if past > 0 else 1.0, dtype=torch.float32)
        q = fp8_cast(xf / scale, self.dtype)
        self.amax_history.append(float(xf.abs().max()) if xf.numel() else 0.0)
        del self.amax_history[:-self.history_len]
        return q, scale


def quantize_mx(x: torch.Tensor, block: int = 32, dtype=torch.float8_e4m3fn) -> tuple[torch.Tensor, torch.Tensor]:
    """MX block scaling along the last dim (OCP MX v1.0, section 6.3): per block of `block`
    elements, X = 2^(floor(log2 amax) - emax_elem) (exponent clamped to [-127, 127]; an all-zero
    block gets X = 1), q = fp8_cast(x / X). Returns q (x's shape, fp8) and the fp32 scales
    (x.shape[:-1] + (K / block,)), all powers of two (exactly representable in float8_e8m0fnu)."""
    _check_dtype(dtype)
    _check_tensor(x)
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a whole number >= 1, got {block!r}")
    if x.dim() < 1 or x.shape[-1] % block:
        raise ValueError(f"the last dim ({tuple(x.shape)[-1:] or 'none'}) must be a multiple of block={block}")
    xf = x.float()
    xb = xf.reshape(*x.shape[:-1], x.shape[-1] // block, block)
    amax = xb.abs().amax(dim=-1)
    emax = fp8_limits(dtype)["emax"]
    exp = torch.floor(torch.log2(amax.clamp_min(torch.finfo(torch.float32).tiny))) - emax
    exp = torch.where(amax > 0, exp.clamp(-127, 127), torch.zeros_like(exp))
    scales = torch.pow(2.0, exp).float()
    q = fp8_cast(xb / scales.unsqueeze(-1), dtype).reshape(x.shape)
    return q, scales


def dequantize_mx(q: torch.Tensor, scales: torch.Tensor, block: int = 32) -> torch.Tensor:
    """q * X per block, in fp32."""
    qf = q.float()
    qb = qf.reshape(*q.shape[:-1], q.shape[-1] // block, block)
    return (qb * scales.float().unsqueeze(-1)).reshape(q.shape)


def fp8_matmul(qa: torch.Tensor, sa, qb: torch.Tensor, sb, block: int | None = None) -> torch.Tensor:
    """The FP8 GEMM of a tensor core, emulated: fp8 operands, fp32 accumulation, scales applied.

    qa (M, K) and qb (K, N) are fp8 tensors. block=None: sa and sb are per-tensor scales
    (numbers or 1-element tensors), out = (qa qb) sa sb. block=k: MX scales along K, sa (M, K/k)
    and sb (K/k, N), out[i, n] = sum over K-blocks j of (qa[i, j-block] . qb[j-block, n]) sa[i, j] sb[j, n].
    Returns float32 (M, N)."""
    for name, t in (("qa", qa), ("qb", qb)):
        if not isinstance(t, torch.Tensor) or t.dtype not in _BITS or t.dim() != 2:
            raise ValueError(f"{name} must be a 2-D float8_e4m3fn/e5m2 tensor, got "
                             f"{getattr(t, 'dtype', type(t).__name__)} {tuple(getattr(t, 'shape', ()))}")
    if qa.shape[1] != qb.shape[0]:
        raise ValueError(f"inner dims differ: qa {tuple(qa.shape)}, qb {tuple(qb.shape)}")
    M, K = qa.shape
    N = qb.shape[1]
    if block is None:
        sa_, sb_ = (torch.as_tensor(s).float().reshape(-1) for s in (sa, sb))
        if sa_.numel() != 1 or sb_.numel() != 1:
            raise ValueError("per-tensor scales must be single numbers")
        return (qa.float() @ qb.float()) * (sa_[0] * sb_[0])
    if isinstance(block, bool) or not isinstance(block, int) or block < 1 or K % block:
        raise ValueError(f"block must be a whole number >= 1 that divides K={K}, got {block!r}")
    nb = K // block
    sa_, sb_ = torch.as_tensor(sa).float(), torch.as_tensor(sb).float()
    if tuple(sa_.shape) != (M, nb) or tuple(sb_.shape) != (nb, N):
        raise ValueError(f"block scales must have shapes {(M, nb)} and {(nb, N)}, got {tuple(sa_.shape)}, {tuple(sb_.shape)}")
    pa = qa.float().reshape(M, nb, block).transpose(0, 1)          # (nb, M, k)
    pb = qb.float().reshape(nb, block, N)                          # (nb, k, N)
    partial = torch.bmm(pa, pb)                                   # (nb, M, N), fp32 accumulation
    return (partial * sa_.t().unsqueeze(-1) * sb_.unsqueeze(1)).sum(0)


def fp8_gemm(a: torch.Tensor, b: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """a (M, K) @ b (K, N) with both operands quantised to e4m3 (per tensor, or MX blocks along K)."""
    if block is None:
        qa, sa = quantize_tensorwise(a)
        qb, sb = quantize_tensorwise(b)
        return fp8_matmul(qa, sa, qb, sb)
    qa, sa = quantize_mx(a, block)
    qbt, sbt = quantize_mx(b.t(), block)
    return fp8_matmul(qa, sa, qbt.t(), sbt.t(), block)


class FP8LinearFunction(torch.autograd.Function):
    """y = x w^T + b with x, w in e4m3 (per-tensor current scaling) and dY in e5m2; fp32 accumulation."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        qx, sx = quantize_tensorwise(x.detach(), torch.float8_e4m3fn)
        qw, sw = quantize_tensorwise(weight.detach(), torch.float8_e4m3fn)
        y = (qx.float() @ qw.float().t()) * (sx * sw)
        if bias is not None:
            y = y + bias.float()
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.has_bias = bias is not None
        return y

    @staticmethod
    def backward(ctx, gy):
        qx, sx, qw, sw = ctx.saved_tensors
        qg, sg = quantize_tensorwise(gy.detach(), torch.float8_e5m2)
        gx = (qg.float() @ qw.float()) * (sg * sw)
        g2 = qg.float().reshape(-1, qg.shape[-1])
        dw = (g2.t() @ qx.float().reshape(-1, qx.shape[-1])) * (sg * sx)
        db = gy.float().reshape(-1, gy.shape[-1]).sum(0) if ctx.has_bias else None
        return gx, dw, db


def fp8_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias) computed in FP8 (FP8LinearFunction); differentiable in all three."""
    _check_tensor(x)
    _check_tensor(weight, "weight")
    if weight.dim() != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x (..., {weight.shape[-1] if weight.dim() else '?'}) and weight (out, in) do not fit: "
                         f"{tuple(x.shape)}, {tuple(weight.shape)}")
    return FP8LinearFunction.apply(x, weight, bias)


def convert_to_fp8(model: nn.Module) -> nn.Module:
    """Make every nn.Linear of `model` (nested ones included) compute with fp8_linear, in place.
    The weights and biases stay the same fp32 Parameters (the master weights). Returns `model`."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be an nn.Module, got {type(model).__name__}")
    for mod in model.modules():
        if isinstance(mod, nn.Linear):
            mod.forward = (lambda m: (lambda x: fp8_linear(x, m.weight, m.bias)))(mod)
    return model


def _patterned_batch(gen, batch, seq, vocab):
    # token sequences t_{i+1} = (a t_i + c) mod vocab: learnable, so the loss falls fast
    start = torch.randint(0, vocab, (batch, 1), generator=gen)
    step = torch.randint(1, 4, (batch, 1), generator=gen)
    return (start + step * torch.arange(seq + 1)) % vocab


def train_compare(steps: int = 40, mode: str = "fp8", seed: int = 0, lr: float = 3e-3) -> list[float]:
    """Losses of `steps` AdamW steps of the course's tiny GPT (models.CheckpointedTransformer,
    2 layers, width 32) on a learnable synthetic sequence task; mode in fp32 | bf16 (CPU autocast)
    | fp8 (every Linear through convert_to_fp8). Same init and batches for every mode."""
    from .models import CheckpointedTransformer
    if mode not in ("fp32", "bf16", "fp8"):
        raise ValueError(f"mode must be fp32, bf16 or fp8, got {mode!r}")
    model = CheckpointedTransformer(vocab=32, hidden=32, heads=4, layers=2, max_seq=32, seed=seed)
    if mode == "fp8":
        convert_to_fp8(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed + 1)
    losses = []
    for _ in range(steps):
        seq = _patterned_batch(gen, 8, 32, 32)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(mode == "bf16")):
            logits = model(seq[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().reshape(-1, 32), seq[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def outlier_channel_errors(channels: int = 16, tokens: int = 256, outlier: float = 2.0 ** 17, seed: int = 0) -> dict:
    """Relative RMS error on the ordinary channels of an activation (channels, tokens) with one
    outlier channel, quantised to e4m3 per tensor and with MX blocks along the tokens (the
    reduction dim of dW = dY^T X), plus the fraction of ordinary values that underflow to 0."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(channels, tokens, generator=gen)
    x[0] *= outlier
    out = {}
    for name, (q, deq) in {"tensor": _tw(x), "block": _mx(x)}.items():
        err = deq[1:] - x[1:]
        out[name] = float(err.norm() / x[1:].norm())
        out[name + "_underflow"] = float(((q.float()[1:] == 0) & (x[1:] != 0)).float().mean())
    return out


def _tw(x):
    q, s = quantize_tensorwise(x)
    return q, q.float() * s


def _mx(x, block=32):
    q, s = quantize_mx(x, block)
    return q, dequantize_mx(q, s, block)


def bench_fp8(out=print) -> bool:
    """The error table (formats, scalings, outlier channel) and the loss-gap table (fp8 vs bf16)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 256, generator=gen)
    rows = []
    for name, dtype in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
        q = fp8_cast(x, dtype).float()
        rows.append((f"cast {name}, N(0,1)", float((q - x).norm() / x.norm()), *cast_counts(x, dtype)))
        q, s = quantize_tensorwise(x * 1e-4, dtype)
        rows.append((f"{name} per-tensor, N(0,1e-4)", float((q.float() * s - x * 1e-4).norm() / (x * 1e-4).norm()),
                     0, 0))
    q = fp8_cast(x * 1e-4, torch.float8_e4m3fn).float()
    rows.append(("cast e4m3, N(0,1e-4), no scale", float((q - x * 1e-4).norm() / (x * 1e-4).norm()),
                 *cast_counts(x * 1e-4, torch.float8_e4m3fn)))
    o = outlier_channel_errors()
    rows.append(("outlier channel, per-tensor", o["tensor"], 0, int(o["tensor_underflow"] * 15 * 256 + 0.5)))
    rows.append(("outlier channel, MX block 32", o["block"], 0, int(o["block_underflow"] * 15 * 256 + 0.5)))
    out(f"{'case':36s} {'rel. error':>10s} {'overflow':>9s} {'underflow':>9s}")
    for r in rows:
        out(f"{r[0]:36s} {r[1]:10.4f} {r[2]:9d} {r[3]:9d}")
    runs = {m: train_compare(40, m) for m in ("fp32", "bf16", "fp8")}
    out(f"\n{'mode':6s} {'first loss':>10s} {'final (mean last 5)':>20s} {'gap vs bf16':>12s}")
    final = {m: sum(v[-5:]) / 5 for m, v in runs.items()}
    for m, v in runs.items():
        out(f"{m:6s} {v[0]:10.4f} {final[m]:20.4f} {final[m] - final['bf16']:12.4f}")
    gap = abs(final["fp8"] - final["bf16"])
    ok = (rows[0][1] < 0.04 and rows[2][1] < 0.08 and o["block"] < 0.1 < o["tensor"]
          and gap < 0.1 and final["fp8"] < 0.6 * runs["fp8"][0])
    out(f"\nfp8 goals met (e4m3 error < 4%, MX beats per-tensor on the outlier channel, fp8-bf16 loss gap < 0.1): {ok}")
    return bool(ok)
