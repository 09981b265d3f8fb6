"""Probes the 07 attention test cells use to measure what a tiled kernel does, from outside the
student's own bookkeeping (issue 24: a full mark means the student built it).

- `AttentionProbe`: a `TensorOpRecorder` (names of the torch calls, largest tensor created) that
  also counts the multiply-adds of every matmul-like call (`@`, `matmul`, `bmm`, `mm`, `einsum`,
  `baddbmm`, `addmm`, `linear`, ...). Computing a causal tile that lies entirely in the future
  costs its matmuls even when the tile is masked afterwards, so this count shows whether the
  future tiles were skipped.
- `tile_bound(...)`: the largest tensor a tiled kernel needs, B*H*max(one tile, one N x d input or
  output), the bound the checks put on `AttentionProbe.largest`.
- `visible_tile_macs(...)`: the multiply-adds of the tiles a causal kernel must compute, per unit
  of inner dimension, so a test can bound the work at a stated multiple of it.
- `OneShotBlocks`: a one-shot iterator over the column blocks of a tensor that measures how many
  blocks the consumer keeps alive at once (weak references) and refuses a second pass; with the
  recorder's largest tensor it tells a one-pass reduction from a two-pass one.

All three only measure; the test cell decides (expect_between / expect_equal on the numbers).
"""
from __future__ import annotations

import math
import weakref

import torch

from .numerics import TensorOpRecorder

__all__ = ["AttentionProbe", "OneShotBlocks", "causal_visible", "tile_bound", "visible_tile_macs"]

_MATMUL_INNER = {
    # name -> function(args) giving the contracted length (None: not a matmul)
    "matmul": lambda a: a[0].shape[-1],
    "__matmul__": lambda a: a[0].shape[-1],
    "__rmatmul__": lambda a: a[1].shape[-1],      # other @ self
    "bmm": lambda a: a[0].shape[-1],
    "mm": lambda a: a[0].shape[-1],
    "mv": lambda a: a[0].shape[-1],
    "dot": lambda a: a[0].shape[-1],
    "inner": lambda a: a[0].shape[-1],
    "baddbmm": lambda a: a[1].shape[-1],
    "addbmm": lambda a: a[1].shape[-1],
    "addmm": lambda a: a[1].shape[-1],
    "addmv": lambda a: a[1].shape[-1],
    "linear": lambda a: a[0].shape[-1],
}


def _einsum_inner(args) -> int:
    eq = args[0].replace(" ", "")
    ops = args[1:]
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = ops[0]
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    sizes: dict[str, int] = {}
    for term, t in zip(terms, ops):
        explicit = [c for c in term if c.isalpha()]
        # letters after an ellipsis are aligned to the end of the shape
        if "..." in term:
            head, tail = term.split("...")
            for c, n in zip(head, t.shape[:len(head)]):
                sizes[c] = int(n)
            for c, n in zip(reversed(tail), reversed(t.shape)):
                sizes[c] = int(n)
        else:
            for c, n in zip(explicit, t.shape):
                sizes[c] = int(n)
    if not rhs and "->" not in eq:     # implicit output: letters that appear once
        all_letters = "".join(terms)
        rhs = "".join(sorted(c for c in set(all_letters) if c.isalpha() and all_letters.count(c) == 1))
    contracted = set(c for c in "".join(terms) if c.isalpha()) - set(rhs)
    return math.prod(sizes.get(c, 1) for c in contracted)


class AttentionProbe(TensorOpRecorder):
    """`TensorOpRecorder` plus `macs`: the multiply-adds of the matmul-like calls made inside."""

    def __init__(self):
        super().__init__()
        self.macs = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs)
        name = getattr(func, "__name__", "")
        try:
            if name == "einsum":
                inner = _einsum_inner(args)
            elif name in _MATMUL_INNER:
                inner = int(_MATMUL_INNER[name](args))
            else:
                inner = 0
            if inner and isinstance(out, torch.Tensor):
                self.macs += int(out.numel()) * int(inner)
        except Exception:                  # an unusual call signature counts nothing, never crashes
            pass
        return out


def tile_bound(batch: int, heads: int, n_q: int, n_k: int, d: int, d_v: int, block_q: int, block_k: int) -> int:
    """Elements of the largest tensor a tiled attention kernel needs: B*H times the larger of one
    (block_q x block_k) score tile and one input or output (N_q or N_k rows of d or d_v)."""
    tile = min(block_q, n_q) * min(block_k, n_k)
    return batch * heads * max(tile, n_q * d, n_k * d, n_q * d_v, n_k * d_v)


def causal_visible(i0: int, rows: int, j0: int, cols: int, n_q: int, n_k: int, causal: bool,
                   align: str = "bottom_right") -> bool:
    """Whether tile (query rows i0.., key columns j0..) holds any visible score. Bottom-right
    alignment (FlashAttention, SDPA's causal_lower_right): query i sees keys j <= i + N_k - N_q;
    top-left (SDPA's is_causal=True): j <= i."""
    if not causal:
        return True
    offset = n_k - n_q if align == "bottom_right" else 0
    return j0 <= i0 + rows - 1 + offset


def visible_tile_macs(n_q: int, n_k: int, block_q: int, block_k: int, causal: bool = True,
                      align: str = "bottom_right") -> tuple[int, int]:
    """(score elements of the tiles a kernel must compute, score elements of all tiles), per (batch,
    head). Multiply by B*H and by the inner lengths of the matmuls run per tile (d + d_v in the
    forward, 3 d + 2 d_v in the backward) for the multiply-adds."""
    needed = total = 0
    for i0 in range(0, n_q, block_q):
        rows = min(block_q, n_q - i0)
        for j0 in range(0, n_k, block_k):
            cols = min(block_k, n_k - j0)
            total += rows * cols
            if causal_visible(i0, rows, j0, cols, n_q, n_k, causal, align):
                needed += rows * cols
    return needed, total


class OneShotBlocks:
    """Iterate once over the column blocks (last dimension) of `x`, `width` columns each (a list
    of widths cycles). Each block is a fresh copy; the probe keeps only weak references, so
    `max_alive` is the largest number of earlier blocks the consumer still held when it asked
    for the next one (a one-pass loop holds at most the previous block). A second pass raises
    ValueError with a message saying why."""

    def __init__(self, x: torch.Tensor, width=1):
        self._x = x
        self._widths = list(width) if isinstance(width, (list, tuple)) else [int(width)]
        self._refs: list[weakref.ref] = []
        self.started = False
        self.blocks = 0
        self.max_alive = 0

    def _alive(self) -> int:
        return sum(r() is not None for r in self._refs)

    def __iter__(self):
        if self.started:
            raise ValueError("these blocks can be read only once (a one-shot iterator, like a stream of "
                             "key blocks): compute the running max and the running sum in one pass")
        self.started = True
        return self._gen()

    def _gen(self):
        n = self._x.shape[-1]
        j0, i = 0, 0
        while j0 < n:
            w = self._widths[i % len(self._widths)]
            self.max_alive = max(self.max_alive, self._alive())
            block = self._x[..., j0:j0 + w].clone()
            self._refs.append(weakref.ref(block))
            self.blocks += 1
            yield block
            del block
            j0, i = j0 + w, i + 1
        self.max_alive = max(self.max_alive, self._alive() - 1)   # the last block may still be in hand


# ---------------------------------------------------------------- grouped-query and packed (varlen) attention
#
# What 07 exercises_2 Part E's test cells measure. `check_gqa` compares `gqa_attention` with torch's
# SDPA on K and V repeated to the query heads (the oracle the test computes) and bounds the largest
# tensor the answer creates by the scores or one input/output, so a K or V expanded to the query
# heads (repeat_interleave, expand + reshape, Llama's repeat_kv) loses the cell: the cases include
# decoding, a few queries against a long cache (N_q < d), where such a copy is the largest tensor
# by far. `check_varlen` compares `varlen_attention` with SDPA run on each sequence alone and
# bounds the multiply-adds of its matmuls by 1.5 x sum_i l_i^2 (d + d_v) per head, so attending
# over the whole packed row with a block-diagonal mask (T^2) or padding every sequence to the
# longest (S max(l)^2) loses the cell. Kit code (not withheld); the references are
# solutions_lib.attention.gqa_attention and varlen_attention.

from .grading import expect_between, expect_close, expect_equal  # noqa: E402

_NO_SDPA = ("scaled_dot_product",)

#: (B, H_q, H_kv, N_q, N_k, d, d_v, causal): the visible cases and the hidden ones
GQA_CASES = {
    "visible": [(2, 8, 2, 12, 12, 8, 8, False), (2, 8, 2, 12, 12, 8, 8, True),
                (2, 8, 2, 3, 40, 16, 16, True), (1, 4, 1, 5, 5, 4, 6, True)],
    "hidden": [(1, 6, 3, 7, 19, 8, 5, True), (2, 4, 4, 9, 9, 8, 8, True), (1, 12, 3, 1, 64, 32, 32, True),
               (3, 6, 1, 4, 30, 16, 12, False), (1, 8, 4, 2, 50, 24, 8, True)],
}

#: (sequence lengths, H, d, d_v, causal)
VARLEN_CASES = {
    "visible": [([5, 17, 9, 30, 3], 2, 4, 4, False), ([5, 17, 9, 30, 3], 2, 4, 4, True), ([12], 1, 3, 5, True)],
    "hidden": [([1, 23, 8, 2, 14, 16], 3, 8, 6, True), ([40, 7, 7], 1, 4, 4, False), ([4] * 10, 2, 5, 3, True),
               ([2, 31, 1, 11], 2, 6, 6, False)],
}


def gqa_bound(batch: int, h_q: int, h_kv: int, n_q: int, n_k: int, d: int, d_v: int) -> int:
    """Elements of the largest tensor grouped-query attention needs: the (B, H_q, N_q, N_k) scores or
    one input or output; a copy of K or V with H_q heads (B H_q N_k d) is larger whenever N_q < d."""
    return batch * max(h_q * n_q * n_k, h_q * n_q * d, h_q * n_q * d_v, h_kv * n_k * d, h_kv * n_k * d_v)


def gqa_oracle(q, k, v, causal: bool) -> torch.Tensor:
    """torch's SDPA with K and V repeated to the query heads (head h uses KV head h // g), causal
    bottom-right aligned (an explicit lower-right mask)."""
    g = q.shape[1] // k.shape[1]
    mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(k.shape[2] - q.shape[2]) if causal else None
    return torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1), attn_mask=mask)


def check_gqa(fn, seed: int, cases: str = "visible", label: str = "") -> None:
    """`fn(q, k, v, causal=...)` against `gqa_oracle` to 1e-10 (float64); no SDPA call; the largest
    tensor it creates at most `gqa_bound` (K and V never expanded to the query heads)."""
    gen = torch.Generator().manual_seed(seed)
    for B, h_q, h_kv, n_q, n_k, d, d_v, causal in GQA_CASES[cases]:
        q = torch.randn(B, h_q, n_q, d, generator=gen, dtype=torch.float64)
        k = torch.randn(B, h_kv, n_k, d, generator=gen, dtype=torch.float64)
        v = torch.randn(B, h_kv, n_k, d_v, generator=gen, dtype=torch.float64)
        what = f"{label}(B, H_q, H_kv, N_q, N_k, d, d_v) = {(B, h_q, h_kv, n_q, n_k, d, d_v)}, causal={causal}"
        expected = gqa_oracle(q, k, v, causal)
        with AttentionProbe() as rec:
            out = fn(q, k, v, causal=causal)
        expect_equal(rec.called(*_NO_SDPA), [], f"scaled_dot_product_attention calls inside gqa_attention ({what})",
                     hint="Build the attention from matmuls (or einsum) and a softmax: SDPA would do the grouping for you.")
        bound = gqa_bound(B, h_q, h_kv, n_q, n_k, d, d_v)
        expect_between(rec.largest, None, bound, f"elements of the largest tensor gqa_attention creates ({what})",
                       hint=f"At most {bound}: the scores or one input/output. A K or V with {h_q} heads "
                            f"({B * h_q * n_k * max(d, d_v)} elements) means the KV heads were repeated: let each KV "
                            "head meet its group of query heads in one matmul instead.")
        expect_equal(tuple(getattr(out, "shape", ())), (B, h_q, n_q, d_v), f"shape of gqa_attention's output ({what})")
        expect_close(out, expected, f"gqa_attention vs SDPA with the KV heads repeated ({what})", rtol=1e-10, atol=1e-12,
                     hint="Query head h uses KV head h // (H_q // H_kv) (consecutive query heads share a KV head); "
                          "scale by 1/sqrt(d)" + ("; causal is bottom-right: query i sees keys j <= i + N_k - N_q."
                                                  if causal else "."))


def varlen_oracle(q, k, v, cu: list[int], causal: bool) -> torch.Tensor:
    """SDPA run on each packed sequence alone (causal within it), results laid end to end."""
    outs = []
    for a, b in zip(cu, cu[1:]):
        qs, ks, vs = (t[a:b].transpose(0, 1)[None] for t in (q, k, v))
        outs.append(torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)[0].transpose(0, 1))
    return torch.cat(outs)


def varlen_macs(lengths, heads: int, d: int, d_v: int) -> int:
    """Multiply-adds of attention run on each sequence alone: H sum_i l_i^2 (d + d_v)."""
    return heads * sum(n * n for n in lengths) * (d + d_v)


def check_varlen(fn, seed: int, cases: str = "visible", label: str = "") -> None:
    """`fn(q, k, v, cu_seqlens, causal=...)` against `varlen_oracle` to 1e-10 (float64, cu_seqlens
    int32); no SDPA call; matmul multiply-adds at most 1.5 x `varlen_macs`; the largest tensor at
    most H max(max(l)^2, T d, T d_v)."""
    gen = torch.Generator().manual_seed(seed)
    for lengths, heads, d, d_v, causal in VARLEN_CASES[cases]:
        total = sum(lengths)
        cu = [0]
        for n in lengths:
            cu.append(cu[-1] + n)
        q = torch.randn(total, heads, d, generator=gen, dtype=torch.float64)
        k = torch.randn(total, heads, d, generator=gen, dtype=torch.float64)
        v = torch.randn(total, heads, d_v, generator=gen, dtype=torch.float64)
        what = f"{label}lengths {lengths}, H = {heads}, d = {d}, d_v = {d_v}, causal={causal}"
        expected = varlen_oracle(q, k, v, cu, causal)
        with AttentionProbe() as rec:
            out = fn(q, k, v, torch.tensor(cu, dtype=torch.int32), causal=causal)
        expect_equal(rec.called(*_NO_SDPA), [], f"scaled_dot_product_attention calls inside varlen_attention ({what})",
                     hint="Build the attention from matmuls (or einsum) and a softmax, so the checks can count its work.")
        need = varlen_macs(lengths, heads, d, d_v)
        expect_between(rec.macs, None, 1.5 * need, f"multiply-adds of varlen_attention's matmuls ({what})",
                       hint=f"Each sequence alone needs {need} in all (H sum l_i^2 (d + d_v)); the whole packed row "
                            f"costs {heads * total * total * (d + d_v)} and padding to the longest "
                            f"{heads * len(lengths) * max(lengths) ** 2 * (d + d_v)}: compute one score matrix per sequence.")
        bound = heads * max(max(lengths) ** 2, total * d, total * d_v)
        expect_between(rec.largest, None, bound, f"elements of the largest tensor varlen_attention creates ({what})",
                       hint=f"At most {bound}: one sequence's scores (H l^2) or one input/output, never the packed T x T.")
        expect_equal(tuple(getattr(out, "shape", ())), (total, heads, d_v), f"shape of varlen_attention's output ({what})")
        expect_close(out, expected, f"varlen_attention vs SDPA on each sequence alone ({what})", rtol=1e-10, atol=1e-12,
                     hint="Sequence i is tokens cu_seqlens[i]:cu_seqlens[i+1]; its queries see only its own keys"
                          + (", and causal means key j <= query i counted from the start of the sequence." if causal else "."))


__all__ += ["GQA_CASES", "VARLEN_CASES", "check_gqa", "check_varlen", "gqa_bound", "gqa_oracle", "varlen_macs",
            "varlen_oracle"]
