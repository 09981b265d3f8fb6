"""Test machinery for 07 exercises 2 (FlashAttention-2 by hand), not an answer: the oracles, the
probed runs of the student's tiled kernels and the known-good stand-ins that grade the autograd
Function on its own. The cells that use it run in the student's kernel (a probe watches the
student's tensor ops there), so each reads as a few lines of intent:

    eo, el = attention_oracle(q, k, v, causal)              # SDPA, bottom-right causal mask, logsumexp
    o, L = run_fa2_forward(fa2_forward, q, k, v, bq, bk, causal, what)
        # under AttentionProbe: no softmax/logsumexp/SDPA call, the largest tensor within one tile or
        # one input/output (tile_bound), and (causal) at most 1.5x the multiply-adds of the visible tiles
    dq, dk, dv = run_fa2_backward(fa2_backward, (q, k, v, o, L, do), bq, bk, causal, what)
    known = KnownFA2()                                      # full-matrix fa2_forward/fa2_backward that log their settings
    check_flash_case(MyFlashAttention2, known, shape, blocks, causal, seed)   # output, grads, bytes saved, calls
    check_gradcheck(MyFlashAttention2, shape, args, seed, label)

Causal masks are bottom-right aligned (query i sees keys j <= i + N_k - N_q), as in the notebook.
Expected values come from plain torch (SDPA, autograd, logsumexp), never from a reference answer.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .grading import expect_between, expect_close, expect_equal
from .probes_attention import AttentionProbe, tile_bound, visible_tile_macs

__all__ = ["BANNED", "KnownFA2", "attention_inputs", "attention_oracle", "autograd_grads", "check_flash_case",
           "check_gradcheck", "forward_outputs", "lower_right", "run_fa2_backward", "run_fa2_forward"]

#: Calls a hand-built attention may not make.
BANNED = ("softmax", "logsumexp", "scaled_dot_product")


def lower_right(n_q: int, n_k: int) -> torch.Tensor:
    """The bottom-right causal mask (True = attend): query i sees keys j <= i + n_k - n_q."""
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def _scores(q, k, causal):
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~lower_right(q.shape[2], k.shape[2]), -math.inf)
    return s


def attention_oracle(q, k, v, causal):
    """torch's fused attention with an explicit bottom-right mask, and the logsumexp of the scaled scores."""
    mask = lower_right(q.shape[2], k.shape[2]) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), torch.logsumexp(_scores(q, k, causal), dim=-1)


def forward_outputs(q, k, v, causal):
    """The inputs of the backward (O, L) from plain torch (not from the student's fa2_forward)."""
    s = _scores(q, k, causal)
    return torch.softmax(s, dim=-1) @ v, torch.logsumexp(s, dim=-1)


def autograd_grads(q, k, v, do, causal):
    """(dq, dk, dv) from torch autograd through SDPA with an explicit bottom-right mask."""
    qq, kk, vv = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    mask = lower_right(q.shape[2], k.shape[2]) if causal else None
    F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask).backward(do)
    return qq.grad, kk.grad, vv.grad


def attention_inputs(gen, cases, with_grad: bool = False) -> list[tuple]:
    """float64 (q, k, v) per case ((B, H, N_q, N_k, d, d_v), block_q, block_k, causal, |q| scale), drawn
    from `gen` in order; with_grad: also (O, L) from plain torch and a random dO, as (q, k, v, O, L, dO)."""
    data = []
    for (B, H, nq, nk, d, dv), _, _, causal, mag in cases:
        qq = torch.randn(B, H, nq, d, generator=gen, dtype=torch.float64) * mag
        kk = torch.randn(B, H, nk, d, generator=gen, dtype=torch.float64)
        vv = torch.randn(B, H, nk, dv, generator=gen, dtype=torch.float64)
        if with_grad:
            dd = torch.randn(B, H, nq, dv, generator=gen, dtype=torch.float64)
            data.append((qq, kk, vv, *forward_outputs(qq, kk, vv, causal), dd))
        else:
            data.append((qq, kk, vv))
    return data


def _probed(fn, args, bq, bk, causal, what, name, per_tile, hint_calls, hint_io):
    q, k, v = args[:3]
    B, H, nq, d = q.shape
    nk, dv = k.shape[2], v.shape[-1]
    with AttentionProbe() as rec:
        out = fn(*args, bq, bk, causal=causal)
    expect_equal(rec.called(*BANNED), [], f"softmax/logsumexp/SDPA calls inside {name} ({what})", hint=hint_calls)
    bound = tile_bound(B, H, nq, nk, d, dv, bq, bk)
    expect_between(rec.largest, None, bound, f"elements of the largest tensor {name} creates ({what})",
                   hint=f"At most B*H*max(tile, N*d) = {bound}: one {min(bq, nq)} x {min(bk, nk)} tile or {hint_io}")
    if causal:
        needed, every = visible_tile_macs(nq, nk, bq, bk)
        per = per_tile(d, dv)
        five = " (5 matmuls per tile)" if name == "fa2_backward" else ""
        expect_between(rec.macs, None, 1.5 * B * H * needed * per, f"multiply-adds of {name}'s matmuls ({what})",
                       hint=f"The tiles on or below the diagonal need {B * H * needed * per} multiply-adds{five}, all tiles "
                            f"{B * H * every * per}: skip the tiles that lie entirely in the future (at most 1.5x allowed).")
    return out


def run_fa2_forward(fa2_forward, q, k, v, bq, bk, causal, what):
    """fa2_forward(q, k, v, bq, bk, causal=causal) under the probe: the calls, the largest tensor and
    (causal) the work; returns its (O, L)."""
    return _probed(fa2_forward, (q, k, v), bq, bk, causal, what, "fa2_forward", lambda d, dv: d + dv,
                   "Build the softmax yourself from max, exp and sum.",
                   "one input/output. A query block against all keys, or one head's full score matrix, is too large.")


def run_fa2_backward(fa2_backward, args, bq, bk, causal, what):
    """fa2_backward(q, k, v, o, L, do, bq, bk, causal=causal) under the probe; returns (dq, dk, dv)."""
    return _probed(fa2_backward, tuple(args), bq, bk, causal, what, "fa2_backward", lambda d, dv: 3 * d + 2 * dv,
                   "Rebuild P as exp(S - L): L already normalises each row.",
                   "one input/gradient. Never a query block against all keys, or one head's full score matrix.")


class KnownFA2:
    """Known-good stand-ins for fa2_forward / fa2_backward (full matrices, plain torch, the same
    signatures) that record the settings they were called with in `calls`."""

    def __init__(self):
        self.calls: list[tuple] = []

    def forward(self, q, k, v, block_q, block_k, causal=False):
        self.calls.append(("fa2_forward", int(block_q), int(block_k), bool(causal)))
        s = _scores(q, k, causal)
        L = torch.logsumexp(s, dim=-1)
        return torch.exp(s - L[..., None]) @ v, L

    def backward(self, q, k, v, o, L, do, block_q, block_k, causal=False):
        self.calls.append(("fa2_backward", int(block_q), int(block_k), bool(causal)))
        p = torch.exp(_scores(q, k, causal) - L[..., None])
        ds = p * (do @ v.transpose(-1, -2) - (do * o).sum(dim=-1, keepdim=True))
        tau = 1 / math.sqrt(q.shape[-1])
        return tau * ds @ k, tau * ds.transpose(-1, -2) @ q, p.transpose(-1, -2) @ do


def _saved(fn, *args):
    """(output, bytes of the distinct storages autograd saves while fn runs, elements of the largest saved tensor)."""
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        seen[st.data_ptr()] = (st.nbytes(), t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    return out, sum(b for b, _ in seen.values()), max((n for _, n in seen.values()), default=0)


def check_flash_case(MyFlashAttention2, known: KnownFA2, shape, blocks, causal, seed, dtype=torch.float64, label=""):
    """MyFlashAttention2.apply(q, k, v, causal, *blocks) with `known` standing in for fa2_forward and
    fa2_backward: output and gradients against SDPA and autograd, the bytes saved for the backward
    (q, k, v, O and L only), the largest saved tensor, and one call of each stand-in with the settings."""
    B, H, nq, nk, d, dv = shape
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(*s, generator=g, dtype=dtype) for s in ((B, H, nq, d), (B, H, nk, d), (B, H, nk, dv)))
    do = torch.randn(B, H, nq, dv, generator=g, dtype=dtype)
    qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
    mask = lower_right(nq, nk) if causal else None
    F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask).backward(do)
    expected = (F.scaled_dot_product_attention(q, k, v, attn_mask=mask), qq.grad, kk.grad, vv.grad)
    mq, mk, mv = (t.clone().requires_grad_(True) for t in (q, k, v))
    known.calls.clear()
    out, nbytes, largest = _saved(lambda a, b, c: MyFlashAttention2.apply(a, b, c, causal, *blocks), mq, mk, mv)
    out.backward(do)
    what = f"{label}(B, H, N_q, N_k, d, d_v) = {shape}, blocks {blocks}, causal={causal}, {str(dtype)[6:]}"
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    expect_close(out, expected[0], f"MyFlashAttention2.apply output vs SDPA, {what}", **tol)
    for name, t, e in zip(("q.grad", "k.grad", "v.grad"), (mq, mk, mv), expected[1:]):
        expect_close(t.grad, e, f"{name} after backward vs autograd through standard attention, {what}", **tol,
                     hint="backward returns (dq, dk, dv, None, None, None): one gradient per forward input, in order.")
    item = torch.finfo(dtype).bits // 8
    expect_equal(int(nbytes), item * (B * H * (nq * d + nk * d + nk * dv + nq * dv) + B * H * nq),
                 f"bytes saved for the backward: q, k, v, O and L, {what}",
                 hint="ctx.save_for_backward(q, k, v, o, L) and nothing else (settings go in ctx attributes).")
    expect_equal(int(largest), B * H * max(nq * d, nk * d, nk * dv, nq * dv), f"elements of the largest saved tensor, {what}",
                 hint="Save O and L, never a probability or score matrix.")
    expect_equal(list(known.calls), [("fa2_forward", *blocks, causal), ("fa2_backward", *blocks, causal)],
                 f"calls of fa2_forward and fa2_backward with (block_q, block_k, causal), {what}",
                 hint="forward calls fa2_forward once, backward calls fa2_backward once, with the same settings.")


def check_gradcheck(MyFlashAttention2, shape, args, seed, label):
    """torch.autograd.gradcheck of MyFlashAttention2.apply(q, k, v, *args) on float64 inputs from `seed`."""
    B, H, nq, nk, d, dv = shape
    g = torch.Generator().manual_seed(seed)
    inputs = tuple(torch.randn(*s, generator=g, dtype=torch.float64).requires_grad_(True)
                   for s in ((B, H, nq, d), (B, H, nk, d), (B, H, nk, dv)))
    ok = torch.autograd.gradcheck(lambda a, b, c: MyFlashAttention2.apply(a, b, c, *args), inputs, raise_exception=False)
    expect_equal(bool(ok), True, f"torch.autograd.gradcheck of MyFlashAttention2.apply(q, k, v, {', '.join(map(str, args))}) {label}",
                 hint="gradcheck compares backward with finite differences of forward: return dq, dk, dv in the order q, k, v.")
