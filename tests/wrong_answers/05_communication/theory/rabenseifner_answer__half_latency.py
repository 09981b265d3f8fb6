# loses: rabenseifner_tests
# why: latency log2(n) alpha: counts only the halving rounds, not the doubling ones
def rabenseifner_allreduce_time(n, nbytes, alpha, bandwidth):
    """2 log2(n) alpha + 2 (n-1)/n * nbytes / bandwidth seconds (n a power of two)."""
    if n < 1 or int(n) != n:
        raise ValueError(f"n must be a whole number of ranks >= 1, got {n}")
    n = int(n)
    if n & (n - 1):
        raise ValueError(f"Rabenseifner's algorithm needs a power-of-two number of ranks, got n = {n}")
    if nbytes < 0 or alpha < 0:
        raise ValueError(f"nbytes and alpha must be >= 0, got {nbytes} and {alpha}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")
    return math.log2(n) * alpha + 2 * (n - 1) / n * nbytes / bandwidth


t_rab_4kb = rabenseifner_allreduce_time(64, 4e3, 5e-6, 25e9)
t_rab_256mb = rabenseifner_allreduce_time(64, 256e6, 5e-6, 25e9)
for name, S, t in [("4 KB", 4e3, t_rab_4kb), ("256 MB", 256e6, t_rab_256mb)]:
    print(f"n = 64, {name:>6}: Rabenseifner {t * 1e3:8.3f} ms, ring {2 * 63 * 5e-6 * 1e3 + 2 * 63 / 64 * S / 25e9 * 1e3:8.3f} ms, "
          f"binomial tree {12 * (5e-6 + S / 25e9) * 1e3:8.3f} ms")
