# loses: bubble_curve_tests
# why: Fraction(target) is the binary float 0.1000000000000000055..., not 1/10: a bubble of exactly 10% counts as below it
from fractions import Fraction


def smallest_m_below(stages, target, denominator="total"):
    """Smallest number of micro-batches whose bubble is strictly below `target`."""
    if denominator not in ("total", "ideal"):
        raise ValueError(f"denominator must be 'total' or 'ideal', got {denominator!r}")
    if not 0 < target < 1:
        raise ValueError(f"target must lie in (0, 1), got {target!r}")
    if stages < 1:
        raise ValueError(f"stages must be >= 1, got {stages}")
    f = Fraction(target)
    m = 1
    while True:
        bubble = Fraction(stages - 1, m + stages - 1) if denominator == "total" else Fraction(stages - 1, m)
        if bubble < f:
            return m
        m += 1


m_values = np.arange(1, 65)
curve_fraction = (8 - 1) / (m_values + 8 - 1)
curve_ratio = (8 - 1) / m_values
m_10pct_fraction = smallest_m_below(8, 0.1, "total")
m_10pct_ratio = smallest_m_below(8, 0.1, "ideal")
print("p = 8: bubble below 10% from m =", m_10pct_fraction, "(idle fraction) and m =", m_10pct_ratio, "(Megatron's ratio)")
