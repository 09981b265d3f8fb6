"""Argument checks shared by the calculators: every bad input is a ValueError that says why."""
from __future__ import annotations

import math
from numbers import Integral, Real


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


def count(name: str, value, minimum: int = 1) -> int:
    """`value` as an int >= minimum; a float with a whole value (4.0) is accepted, 4.5 or True is not."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        if not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(float(value)) \
                and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def positive_real(name: str, value) -> float:
    """`value` as a float; ValueError unless it is a finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def size(name: str, value, *, positive: bool = True) -> float:
    """A byte count or other size as a float: finite, > 0 (or >= 0 when not `positive`)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)
