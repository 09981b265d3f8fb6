"""Probes of 12 exercises 2 (FP8 training, EXT-FP8): what must run in the student's process, the
tensors autograd saves for the backward of the student's FP8 linear layer. A kit module, not
withheld. Everything else its cells need (oracles, course copies, the tiny GPT) is in
`checks_fp8`, re-exported here so `probes_fp8.<name>` keeps working.

- `SavedForBackward`: records the dtype and bytes of every tensor autograd saves in its block.
- `check_fp8_linear(...)`: forward and the three gradients of the student's `fp8_linear` against
  the float64 oracle, and what autograd saved (fp8 copies, not float32 ones).
"""
from __future__ import annotations

import torch

from .checks_fp8 import *  # noqa: F401,F403  (the oracles and copies, under their old names)
from .checks_fp8 import __all__ as _CHECKS
from .checks_fp8 import forbidden_except, oracle_linear, saturated, upstream_fp8_matmul, upstream_quantize_tensorwise

__all__ = [*_CHECKS, "SavedForBackward", "check_fp8_linear"]


class SavedForBackward:
    """`with SavedForBackward() as saved:` records (dtype, bytes) of each tensor autograd packs."""

    def __enter__(self):
        self.tensors: list[tuple[torch.dtype, int]] = []

        def pack(t):
            self.tensors.append((t.dtype, t.numel() * t.element_size()))
            return t

        self._ctx = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        return False

    def count(self, *dtypes) -> int:
        return sum(1 for d, _ in self.tensors if d in dtypes)

    def bytes(self, *dtypes) -> int:
        return sum(b for d, b in self.tensors if not dtypes or d in dtypes)


def check_fp8_linear(fp8_linear, x, w, b, gy, what):
    """Forward and the three gradients of the student's `fp8_linear(x, w, b)` against the float64
    oracle (e4m3 x and W with current scaling, e5m2 dy, fp32 accumulation), and what autograd
    saved for the backward (at least 2 fp8 tensors, at most 64 bytes of anything else)."""
    from . import fp8 as _ref
    from .grading import expect_between, expect_close, no_delegation

    x, w = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    b = b.clone().requires_grad_(True) if b is not None else None
    with no_delegation("fp8_linear", _ref, *forbidden_except(saturated, upstream_quantize_tensorwise,
                                                               upstream_fp8_matmul)):
        with SavedForBackward() as saved:
            y = fp8_linear(x, w, b)
        y.backward(gy)
    o = oracle_linear(x.detach(), w.detach(), b.detach() if b is not None else None, gy)
    expect_close(y, o["y"], f"y ({what})", rtol=1e-5, atol=1e-5 * float(o["y"].abs().max()),
                 hint="x and weight in e4m3 with per-tensor current scaling, fp32 accumulation, then + bias.")
    for name, got, want in (("dx", x.grad, o["dx"]), ("dW", w.grad, o["dw"])):
        expect_close(got, want, f"{name} ({what})", rtol=1e-5, atol=1e-5 * float(want.abs().max()),
                     hint="dy in e5m2 (not e4m3) with current scaling; weight and x from their saved e4m3 copies.")
    if b is not None:
        expect_close(b.grad, o["db"], f"db ({what})", rtol=1e-5, atol=1e-6 * float(o["db"].abs().max()),
                     hint="db is the fp32 sum of dy over every leading dim, from the unquantised dy.")
    expect_between(saved.count(torch.float8_e4m3fn, torch.float8_e5m2), 2, None,
                   f"fp8 tensors saved for the backward ({what})", hint="Save q_x and q_W with ctx.save_for_backward.")
    expect_between(saved.bytes() - saved.bytes(torch.float8_e4m3fn, torch.float8_e5m2), 0, 64,
                   f"bytes of non-fp8 tensors saved for the backward ({what})",
                   hint="Save only fp8 tensors and scalar scales, not float32 copies of x or weight.")
