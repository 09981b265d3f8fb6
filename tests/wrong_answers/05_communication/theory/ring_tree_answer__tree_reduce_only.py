# loses: ring_tree_tests
# why: tree counts only the reduce, not the broadcast back (log n rounds, not 2 log n)
def ring_allreduce_time(n, nbytes, alpha, bandwidth):
    """2(n-1) alpha + 2 (n-1)/n * nbytes / bandwidth seconds."""
    _check(n, nbytes, alpha, bandwidth)
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / bandwidth


def tree_allreduce_time(n, nbytes, alpha, bandwidth):
    """2 ceil(log2 n) (alpha + nbytes / bandwidth) seconds (binomial tree, not pipelined)."""
    _check(n, nbytes, alpha, bandwidth)
    rounds = math.ceil(math.log2(n))
    return rounds * (alpha + nbytes / bandwidth)


def _check(n, nbytes, alpha, bandwidth):
    if n < 1 or int(n) != n:
        raise ValueError(f"n must be a whole number of ranks >= 1, got {n}")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0 seconds, got {alpha}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")


L = math.ceil(math.log2(64))
crossover_64 = (64 - 1 - L) * 5e-6 * 25e9 / (L - 63 / 64)
print(f"crossover at n = 64: {crossover_64 / 1e6:.3f} MB")
