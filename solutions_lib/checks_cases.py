"""Case-by-case comparisons shared by the `checks_*` modules (04-07), so a hidden test cell reads

    with no_delegation("mfu", ref):
        got = [mfu(*c) for c in cases]
    expect_each_close("mfu", cases, got, expected, rtol=1e-9)

instead of a loop. Each case is one `expect_close` / `expect_equal`, in order, whose description
names the call (`mfu(1e15, 2e17)`), exactly as the loops these replace did.
"""
from __future__ import annotations

from .grading import expect_close, expect_equal


def _what(name, case, describe) -> str:
    return f"{name}{describe(case) if describe else case}"


def expect_each_close(name: str, cases, got, expected, *, rtol: float, atol: float = 0.0, unit: str = "",
                      hint: str = "", describe=None) -> None:
    """`expect_close(got[i], expected[i], f"{name}{cases[i]}")` for every case, in order.

    `describe(case)` writes a case for the message (default: the case itself, as a call's arguments)."""
    for case, g, e in zip(cases, got, expected):
        expect_close(g, e, _what(name, case, describe), rtol=rtol, atol=atol, unit=unit, hint=hint)


def expect_each_equal(name: str, cases, got, expected, *, convert=None, hint: str = "", describe=None) -> None:
    """`expect_equal(convert(got[i]), expected[i], f"{name}{cases[i]}")` for every case, in order
    (`convert`, e.g. `int`, turns a student's integral float or numpy integer into the expected type)."""
    for case, g, e in zip(cases, got, expected):
        expect_equal(convert(g) if convert else g, e, _what(name, case, describe), hint=hint)
