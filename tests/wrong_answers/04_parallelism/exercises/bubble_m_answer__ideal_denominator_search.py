# loses: bubble_m_tests
# why: searches with Megatron's ratio (N-1)/M < target, the wrong denominator for GPipe's bubble
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
    f = Fraction(repr(float(target)))
    M = 1
    while Fraction(N - 1, M) >= f:
        M += 1
    return M


m_below_10pct = {n: min_micro_batches(n, 0.1) for n in (4, 8, 16)}
print(m_below_10pct)
