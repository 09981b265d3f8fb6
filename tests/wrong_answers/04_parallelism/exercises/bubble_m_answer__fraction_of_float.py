# loses: bubble_m_tests
# why: Fraction(target) is the binary float just above 0.1, not 1/10: a bubble of exactly 10% passes as below it
from fractions import Fraction


def gpipe_bubble(N, M):
    """Idle fraction of a GPipe step: (N - 1) / (N + M - 1)."""
    if N < 1 or M < 1:
        raise ValueError(f"need N >= 1 and M >= 1, got N={N}, M={M}")
    return (N - 1) / (N + M - 1)


def min_micro_batches(N, target=0.1):
    """Smallest M with (N - 1) / (N + M - 1) strictly below target."""
    if not 0 < target < 1:
        raise ValueError(f"target must lie in (0, 1), got {target}")
    if N < 1:
        raise ValueError(f"N must be >= 1, got {N}")
    f = Fraction(target)
    # (N-1)/(N+M-1) < f  <=>  M > (N-1)(1-f)/f
    return max(1, math.floor((N - 1) * (1 - f) / f) + 1)


m_below_10pct = {n: min_micro_batches(n, 0.1) for n in (4, 8, 16)}
print(m_below_10pct)
