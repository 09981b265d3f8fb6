"""Argument checks shared by the calculators: every bad input is a ValueError that says why."""
from __future__ import annotations

import math


def positive(name: str, value, *, integer: bool = False) -> None:
    """Raise ValueError unless `value` is a finite number > 0 (an int when `integer`)."""
    _number(name, value, integer)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def non_negative(name: str, value, *, integer: bool = False) -> None:
    """Raise ValueError unless `value` is a finite number >= 0 (an int when `integer`)."""
    _number(name, value, integer)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")


def fraction(name: str, value, *, open_low: bool = False) -> None:
    """Raise ValueError unless 0 <= value <= 1 (0 < value when `open_low`)."""
    _number(name, value, False)
    if not (0 < value <= 1 if open_low else 0 <= value <= 1):
        raise ValueError(f"{name} must lie in {'(0, 1]' if open_low else '[0, 1]'}, got {value!r}")


def choice(name: str, value, options) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {sorted(options)}, got {value!r}")


def _number(name, value, integer):
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if integer and float(value) != int(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
