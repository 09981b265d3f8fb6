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
