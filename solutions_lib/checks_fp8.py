"""Checks of 12 exercises 2 (FP8 training, EXT-FP8) that only call the student's code and compare:
oracles from torch's own float8 casts and closed forms, the course's copies of earlier answers
(docs/GRADING.md rule 6: one slip costs one cell) and the tiny GPT the conversion is tried on.
A kit module, not withheld; its cells run grader-side (rule 10). What must watch the student's
process (the tensors autograd saves) is in `probes_fp8`, which re-exports all of this.

The test cells forbid the answers they grade from calling these oracles
(`grading.no_delegation(task, ..., *forbidden_except(...))`) and swap the `upstream_*` copies in
for earlier answers only.

- `limits(dtype)`: max normal, min normal, min subnormal of e4m3fn / e5m2 from the bit layout.
- `saturated(x, dtype)`: torch's own round-to-nearest-even cast after clamping to +-max: the
  bitwise oracle of a saturating cast (torch's e5m2 cast overflows to inf, its e4m3fn cast
  saturates; clamping first makes both saturate).
- `finite_values(dtype)`: the values of all finite codes of a format (from the 256 bit patterns).
- `rounding_probes(dtype)`: every finite value, every midpoint between neighbours (ties go to
  the even code), the float32 neighbours of each midpoint, and values beyond the range.
- `bits(t)`: an fp8 tensor's codes as a flat int64 tensor, for bitwise comparison.
- `exact_matmul(...)`: the float64 product of dequantised fp8 operands (per-tensor or MX block
  scales), and `accumulation_bound(...)`: the error an fp32 accumulator may add, K eps32 sum|a||b|.
- `gpt_logits_with(...)` / `train_losses(...)`: the course's tiny GPT (models.CheckpointedTransformer)
  with its Linear layers through a given function, and a seeded training run in fp8 or bf16.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["E4M3", "E5M2", "LINEAR_COPIES", "accumulation_bound", "accumulation_excess", "bits", "check_quantize_mx",
           "exact_matmul", "finite_values", "forbidden_except", "gpt_logits_with", "int_pair", "limits",
           "not_powers_of_two", "on_e4m3_grid", "oracle_linear", "ordinary_channel_error", "outlier_activation",
           "patterned_batch", "rounding_probes", "same_parameters", "saturated", "tiny_gpt", "train_losses",
           "upstream_fp8_linear", "upstream_fp8_matmul", "upstream_quantize_tensorwise"]

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
_BITS = {E4M3: (4, 3), E5M2: (5, 2)}


def limits(dtype) -> dict:
    """{'max_normal', 'min_normal', 'min_subnormal'} from (exponent bits e, mantissa bits m),
    bias 2^(e-1) - 1: e4m3fn uses the top exponent (only S.1111.111 is NaN), e5m2 reserves it."""
    e, m = _BITS[dtype]
    bias = 2 ** (e - 1) - 1
    top = 2 ** e - 1 if dtype == E4M3 else 2 ** e - 2
    mant = 2 - 2.0 ** (1 - m) if dtype == E4M3 else 2 - 2.0 ** -m
    return {"max_normal": 2.0 ** (top - bias) * mant, "min_normal": 2.0 ** (1 - bias),
            "min_subnormal": 2.0 ** (1 - bias - m)}


def saturated(x: torch.Tensor, dtype) -> torch.Tensor:
    """torch's cast after clamping to [-max, max]: the saturating cast, bit for bit."""
    fmax = limits(dtype)["max_normal"]
    return x.float().clamp(-fmax, fmax).to(dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The codes of an fp8 tensor (flat int64); a tensor of another dtype gives its float values' codes
    only if it is 1 byte wide, so compare dtypes first."""
    return t.contiguous().view(torch.uint8).reshape(-1).long()


def finite_values(dtype) -> torch.Tensor:
    """The float32 values of every finite code of `dtype`, sorted, +0 once (253 for e4m3fn, 247 for e5m2)."""
    v = torch.arange(256, dtype=torch.uint8).view(dtype).float()
    v = v[torch.isfinite(v)]
    return torch.unique(v)           # sorted; -0 and +0 merge


def rounding_probes(dtype) -> torch.Tensor:
    """Finite values, midpoints between neighbours (exact in float32), their float32 neighbours
    just below and above, and out-of-range values (+-1.5 max, +-1e30, +-inf)."""
    v = finite_values(dtype)
    mid = (v[:-1] + v[1:]) / 2
    below = torch.nextafter(mid, torch.full_like(mid, -math.inf))
    above = torch.nextafter(mid, torch.full_like(mid, math.inf))
    fmax = limits(dtype)["max_normal"]
    far = torch.tensor([1.5 * fmax, -1.5 * fmax, 1e30, -1e30, math.inf, -math.inf])
    return torch.cat([v, mid, below, above, far])


def exact_matmul(qa, sa, qb, sb, block=None) -> torch.Tensor:
    """float64 product of the dequantised operands: qa (M, K) fp8 with scale sa (scalar, or (M, K/block)),
    qb (K, N) fp8 with scale sb (scalar, or (K/block, N))."""
    a, b = qa.double(), qb.double()
    if block is None:
        return (a @ b) * (float(sa) * float(sb))
    a = a * sa.double().repeat_interleave(block, dim=1)
    b = b * sb.double().repeat_interleave(block, dim=0)
    return a @ b


def accumulation_bound(qa, sa, qb, sb, block=None, factor: float = 4.0) -> torch.Tensor:
    """factor * K * eps32 * (|A| |B|): the most a float32 accumulation may differ from the exact sum
    (a bf16 accumulator or bf16 output is ~2^8 times further off)."""
    K = qa.shape[1]
    mag = exact_matmul(qa.float().abs().to(qa.dtype), sa, qb.float().abs().to(qb.dtype), sb, block)
    return factor * K * torch.finfo(torch.float32).eps * mag.abs()


# ------------------------------------------------------------ course copies (rule 6) and oracles

def upstream_quantize_tensorwise(x: torch.Tensor, dtype=E4M3):
    """The course's per-tensor current scaling: scale = amax / max (1 for zeros), q = saturated(x / scale)."""
    xf = x.float()
    amax = xf.abs().max() if xf.numel() else torch.tensor(0.0)
    scale = (amax / limits(dtype)["max_normal"]).float() if amax > 0 else torch.tensor(1.0)
    return saturated(xf / scale, dtype), scale


class _UpstreamFP8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        qx, sx = upstream_quantize_tensorwise(x.detach(), E4M3)
        qw, sw = upstream_quantize_tensorwise(w.detach(), E4M3)
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.has_bias = b is not None
        y = (qx.float() @ qw.float().t()) * (sx * sw)
        return y + b.float() if b is not None else y

    @staticmethod
    def backward(ctx, gy):
        qx, sx, qw, sw = ctx.saved_tensors
        qg, sg = upstream_quantize_tensorwise(gy.detach(), E5M2)
        gx = (qg.float() @ qw.float()) * (sg * sw)
        dw = (qg.float().reshape(-1, qg.shape[-1]).t() @ qx.float().reshape(-1, qx.shape[-1])) * (sg * sx)
        db = gy.float().reshape(-1, gy.shape[-1]).sum(0) if ctx.has_bias else None
        return gx, dw, db


def upstream_fp8_linear(x, weight, bias=None):
    """The course's FP8 linear (e4m3 forward, e5m2 gradients, per-tensor current scaling)."""
    return _UpstreamFP8Linear.apply(x, weight, bias)


def oracle_linear(x, w, b, gy, grad_dtype=E5M2) -> dict:
    """float64 y, dx, dw, db of the FP8 linear from saturated casts (x, w in e4m3, dY in grad_dtype)."""
    qx, sx = upstream_quantize_tensorwise(x, E4M3)
    qw, sw = upstream_quantize_tensorwise(w, E4M3)
    qg, sg = upstream_quantize_tensorwise(gy, grad_dtype)
    X, W, G = qx.double() * float(sx), qw.double() * float(sw), qg.double() * float(sg)
    y = X @ W.t() + (b.double() if b is not None else 0.0)
    G2, X2 = G.reshape(-1, G.shape[-1]), X.reshape(-1, X.shape[-1])
    return {"y": y, "dx": G @ W, "dw": G2.t() @ X2, "db": gy.double().reshape(-1, gy.shape[-1]).sum(0)}


def tiny_gpt(seed: int = 0):
    """The course's tiny GPT (models.CheckpointedTransformer): vocab 32, width 32, 4 heads, 2 layers."""
    from .models import CheckpointedTransformer
    return CheckpointedTransformer(vocab=32, hidden=32, heads=4, layers=2, max_seq=32, seed=seed)


def gpt_logits_with(model: nn.Module, idx: torch.Tensor, linear) -> torch.Tensor:
    """The model's logits with every nn.Linear computed as linear(x, weight, bias) (forwards restored after)."""
    saved = []
    for m in model.modules():
        if isinstance(m, nn.Linear):
            saved.append((m, m.__dict__.get("forward")))
            m.forward = (lambda mod: (lambda x: linear(x, mod.weight, mod.bias)))(m)
    try:
        with torch.no_grad():
            return model(idx)
    finally:
        for m, f in saved:
            if f is None:
                m.__dict__.pop("forward", None)
            else:
                m.forward = f


def patterned_batch(gen, batch=8, seq=32, vocab=32):
    """Sequences t_{i+1} = t_i + c mod vocab (c in 1..3): a task the tiny GPT learns in a few dozen steps."""
    start = torch.randint(0, vocab, (batch, 1), generator=gen)
    step = torch.randint(1, 4, (batch, 1), generator=gen)
    return (start + step * torch.arange(seq + 1)) % vocab


def train_losses(model: nn.Module, steps: int, seed: int, bf16: bool = False, lr: float = 3e-3) -> list[float]:
    """AdamW (fp32 state) on patterned batches; bf16=True runs the forward under CPU autocast."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        seq = patterned_batch(gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(seq[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), seq[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def on_e4m3_grid(t: torch.Tensor) -> float:
    """Fraction of t's entries that a per-tensor e4m3 round trip leaves unchanged (1.0: t holds fp8 values)."""
    q, s = upstream_quantize_tensorwise(t.detach(), E4M3)
    return float((q.float() * s == t.detach().float()).float().mean())


def upstream_fp8_matmul(qa, sa, qb, sb, block=None):
    """The course's emulated FP8 GEMM: dequantise (exact: power-of-two or scalar scales) and multiply in fp32."""
    a, b = qa.float(), qb.float()
    if block is None:
        return (a @ b) * (torch.as_tensor(sa).float().reshape(()) * torch.as_tensor(sb).float().reshape(()))
    nb = a.shape[1] // block
    pa = a.reshape(a.shape[0], nb, block).transpose(0, 1)
    pb = b.reshape(nb, block, b.shape[1])
    sa, sb = torch.as_tensor(sa).float(), torch.as_tensor(sb).float()
    return (torch.bmm(pa, pb) * sa.t().unsqueeze(-1) * sb.unsqueeze(1)).sum(0)


def accumulation_excess(out, qa, sa, qb, sb, block=None) -> float:
    """max |out - exact| / accumulation_bound: <= 1 for an fp32 accumulation (inf for a non-finite out)."""
    exact = exact_matmul(qa, sa, qb, sb, block)
    bound = accumulation_bound(qa, sa, qb, sb, block) + 1e-300
    o = out.detach().double()
    if o.shape != exact.shape or not torch.isfinite(o).all():
        return math.inf
    return float(((o - exact).abs() / bound).max())


def not_powers_of_two(scales: torch.Tensor) -> int:
    """How many entries of `scales` (fp32 or float8_e8m0fnu) are not positive powers of two."""
    s = scales.detach().float()
    m, _ = torch.frexp(s)
    return int(((m != 0.5) | (s <= 0) | ~torch.isfinite(s)).sum())


def ordinary_channel_error(x: torch.Tensor, deq: torch.Tensor) -> float:
    """Relative RMS error on rows 1.. of x (row 0 is the outlier channel)."""
    return float((deq[1:].double() - x[1:].double()).norm() / x[1:].double().norm())


def outlier_activation(seed: int, channels: int = 16, tokens: int = 256, outlier: float = 2.0 ** 17) -> torch.Tensor:
    """(channels, tokens) N(0, 1) activations whose channel 0 is `outlier` times larger."""
    x = torch.randn(channels, tokens, generator=torch.Generator().manual_seed(seed))
    x[0] *= outlier
    return x


def forbidden_except(*allowed) -> tuple:
    """The oracles and course copies of this module that an answer may not call, except `allowed`
    (the copies a test cell swaps in for earlier answers): pass them to `grading.no_delegation`.
    The autograd Function is listed by its forward and backward (its class dict is cyclic)."""
    every = (saturated, upstream_quantize_tensorwise, upstream_fp8_matmul, upstream_fp8_linear,
             _UpstreamFP8Linear.forward, _UpstreamFP8Linear.backward, oracle_linear, exact_matmul, gpt_logits_with, train_losses)
    return tuple(f for f in every if f not in allowed)


#: the course copies a test of convert_to_fp8 swaps in (allowed there, forbidden elsewhere)
LINEAR_COPIES = (saturated, upstream_quantize_tensorwise, upstream_fp8_matmul, upstream_fp8_linear,
                 _UpstreamFP8Linear.forward, _UpstreamFP8Linear.backward)


def same_parameters(model: nn.Module, before: list) -> int:
    """How many of `before` (a list of Parameters) are, in order, the very objects model.parameters() yields."""
    now = list(model.parameters())
    return sum(1 for a, b in zip(now, before) if a is b) if len(now) == len(before) else -1


def int_pair(result):
    """`result` as a tuple of two Python ints when it is a pair of ints (Python or numpy ints, 0-d integer
    tensors); anything else is returned as it is, so that the check shows what came back."""
    import numpy as np
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return result
    out = []
    for v in result:
        if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.is_floating_point() and v.dtype != torch.bool:
            out.append(int(v.item()))
        elif isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            out.append(int(v))
        else:
            return result
    return tuple(out)


def check_quantize_mx(quantize_mx, x, block, dtype, what, guard=None):
    """Run the student's `quantize_mx(x, block, dtype)` under `guard()` (the cell's
    `no_delegation`: references and this module's oracles forbidden, the saturating cast allowed;
    default: that guard here, which sees calls only when this runs in the student's process) and
    check what holds for any correct design: one scale per block, every scale a power of two,
    and q = cast(x / X) with the student's own X. Returns (q, scales as float32)."""
    from . import fp8 as _ref
    from .grading import expect_close, expect_equal, no_delegation

    if guard is None:
        def guard():
            return no_delegation("quantize_mx", _ref, *forbidden_except(saturated))
    with guard():
        q, s = quantize_mx(x, block, dtype)
    s = s.float()
    expect_equal(tuple(s.shape), (*x.shape[:-1], x.shape[-1] // block), f"shape of scales ({what})",
                 hint="One scale per block of `block` elements along the last dim.")
    expect_equal(not_powers_of_two(s), 0, f"scales that are not powers of two ({what})")
    expect_close(q.float(), saturated(x / s.repeat_interleave(block, -1), dtype).float(),
                 f"q = cast(x / X) per block ({what})", rtol=0, atol=0)
    return q, s
