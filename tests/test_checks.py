"""The shared argument checks: whole numbers pass, booleans, fractions and non-numbers do not."""
from __future__ import annotations

import math

import pytest

from solutions_lib._checks import count, positive_real


def test_count_accepts_whole_numbers_and_returns_an_int():
    assert count("n", 4) == 4 and type(count("n", 4.0)) is int
    assert count("rank", 0, minimum=0) == 0


@pytest.mark.parametrize("bad", [True, False, 4.5, math.nan, math.inf, "4", None, 0, -3])
def test_count_rejects(bad):
    with pytest.raises(ValueError, match="^n must be"):
        count("n", bad)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "1"])
def test_positive_real_rejects(bad):
    with pytest.raises(ValueError):
        positive_real("x", bad)
