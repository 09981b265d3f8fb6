"""What 07's Part E test cells measure about bf16 weights kept without an fp32 master copy.

`check_kahan` runs the student's `kahan_bf16_step` in a loop the test owns (so the only state
carried from step to step is what the function returns) and compares the final weights with the
exact sum of the updates in float64: a Kahan-compensated bf16 weight stays within one bf16 step
of it, where plain bf16 rounding loses every update below half a step. `check_stochastic_round`
checks that each rounded value is one of the two bf16 neighbours of its input (found with
`torch.nextafter`, not with the bit trick), that exact bf16 values stay, that the rounding is
unbiased and rounds up with the right probability (draws counted, five standard deviations),
and that the draws come from the generator passed in. Kit code (not withheld): the references
are `solutions_lib.numerics.kahan_bf16_step` and `stochastic_round_bf16`.
"""
from __future__ import annotations

import torch

from .grading import expect_between, expect_equal, expect_true

BF16 = torch.bfloat16


def bf16_neighbours(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(lo, hi): the bf16 values just below and just above each fp32 value (both = x when x is one)."""
    n = x.to(BF16)
    up, down = torch.full_like(n, float("inf")), torch.full_like(n, float("-inf"))
    exact = n.float() == x
    lo = torch.where(n.float() > x, torch.nextafter(n, down), n)
    hi = torch.where(n.float() < x, torch.nextafter(n, up), n)
    return torch.where(exact, n, lo), torch.where(exact, n, hi)


def check_kahan(step, seed: int, size: int = 32, steps: int = 1500, scale: float = 1e-4, signed: bool = False,
                label: str = "") -> None:
    """`steps` updates of about `scale` (each below half a bf16 step of weights in [1, 2)) through
    `step(param, comp, update) -> (param, comp)`; the final weights within one bf16 step of the exact sum."""
    gen = torch.Generator().manual_seed(seed)
    p = (1.0 + torch.rand(size, generator=gen)).to(BF16)
    c = torch.zeros(size, dtype=BF16)
    exact = p.double()
    first = None
    for i in range(steps):
        u = scale * ((torch.rand(size, generator=gen) - 0.5) * 2 if signed else torch.rand(size, generator=gen) + 0.2)
        out = step(p, c, u)
        ok = isinstance(out, tuple) and len(out) == 2
        if first is None or not ok:   # one record for a correct answer, not one per step (thousands)
            expect_true(ok, f"kahan_bf16_step must return a tuple (param, comp) ({label}): the new weights and the "
                            "new compensation, both bf16 tensors")
        if first is None:
            first = out
            expect_equal([str(t.dtype) for t in out], ["torch.bfloat16", "torch.bfloat16"],
                         f"the dtypes of (param, comp) after one step ({label})",
                         hint="both the weights and the compensation are stored in bf16: that is the point")
            expect_equal([tuple(t.shape) for t in out], [(size,), (size,)], f"the shapes of (param, comp) ({label})")
            again = step(p, c, u)
            expect_true(all(torch.equal(a, b) for a, b in zip(out, again)),
                        f"the same step twice on the same inputs must give the same result ({label}): keep no state "
                        "outside (param, comp); everything the next step needs is returned")
        p, c = out
        exact += u.double()
    ulps = ((p.double() - exact).abs() / (exact.abs() * 2.0 ** -7)).max().item()
    expect_between(ulps, 0.0, 1.0, f"largest error of the final weights, in bf16 steps, after {steps} updates of "
                                    f"about {scale:g} ({label})",
                   hint="the compensation must carry what each rounding lost into the next update "
                        "(y = update - comp; t = bf16(param + y); comp = (t - param) - y)")


def check_stochastic_round(fn, seed: int, label: str = "") -> None:
    """`fn(x, generator)`: a bf16 neighbour of each x, exact values kept, unbiased, seeded by `generator`."""
    gen = torch.Generator().manual_seed(seed)
    mags = 10.0 ** torch.randint(-6, 4, (600,), generator=gen).float()
    x = torch.cat([torch.randn(600, generator=gen) * mags,
                   torch.tensor([0.0, 1.0, -2.5, 0.375, 3.0e38, -1.0e-30])])
    r = fn(x.clone(), torch.Generator().manual_seed(seed + 1))
    expect_equal(str(getattr(r, "dtype", type(r).__name__)), "torch.bfloat16", f"the dtype of the result ({label})")
    expect_equal(tuple(r.shape), tuple(x.shape), f"the shape of the result ({label})")
    lo, hi = bf16_neighbours(x)
    off = int((~((r == lo) | (r == hi))).sum())
    expect_equal(off, 0, f"values rounded to something other than a bf16 neighbour of the input ({label})",
                 hint="round to the bf16 value just below or just above x, never further")
    exact = x.to(BF16).float() == x
    expect_equal(int((r[exact].float() != x[exact]).sum()), 0, f"exact bf16 values changed by the rounding ({label})")
    n = 30000
    for v in (1.0 + 3.0e-3, -0.3337, 6.1e-5):
        draws = fn(torch.full((n,), v), torch.Generator().manual_seed(seed + 2)).double()
        l, h = (float(t[0]) for t in bf16_neighbours(torch.tensor([v])))
        prob = (v - l) / (h - l)
        up = float((draws == h).double().mean())
        sd = (prob * (1 - prob) / n) ** 0.5
        expect_between(up, prob - 5 * sd, prob + 5 * sd,
                       f"fraction of {n} draws of {v:g} rounded up ({label})",
                       hint=f"round up with probability (x - lo) / (hi - lo) = {prob:.3f}: then E[result] = x")
    a = fn(x.clone(), torch.Generator().manual_seed(seed + 3))
    b = fn(x.clone(), torch.Generator().manual_seed(seed + 3))
    c = fn(x.clone(), torch.Generator().manual_seed(seed + 4))
    expect_true(torch.equal(a, b), f"two calls with equally seeded generators must round the same way ({label}): "
                "draw the random numbers from the generator argument, not from torch's global one")
    expect_true(not torch.equal(a, c), f"differently seeded generators must round differently ({label}): the "
                "rounding must be random, drawn from the generator argument")
