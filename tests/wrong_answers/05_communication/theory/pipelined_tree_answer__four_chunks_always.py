# loses: pipelined_tree_tests
# why: charges 4 chunks of S/(2k) per round for every n: with 2 ranks the busiest sends 2, with 3 or 4 it sends 3
def pipelined_tree_allreduce_time(n, nbytes, alpha, bandwidth, chunks):
    """(2D + k - 1)(alpha + c nbytes / (2 k bandwidth)) seconds, D = floor(log2 n), c = 2, 3, 3, 4, 4, ...; 0 for one rank."""
    _check_tree(n, nbytes, alpha, bandwidth)
    if chunks < 1 or int(chunks) != chunks:
        raise ValueError(f"chunks must be a whole number >= 1, got {chunks}")
    if n == 1:
        return 0.0
    D = int(n).bit_length() - 1
    return (2 * D + chunks - 1) * (alpha + _chunks_per_round(n) * nbytes / (2 * chunks * bandwidth))


def optimal_tree_chunks(n, nbytes, alpha, bandwidth):
    """k* = sqrt((2D - 1) * b / alpha) with b = c nbytes / (2 bandwidth), at least 1.0."""
    _check_tree(n, nbytes, alpha, bandwidth)
    if n < 2:
        raise ValueError(f"need n >= 2 ranks to pipeline anything, got n = {n}")
    if alpha <= 0:
        raise ValueError("need alpha > 0: without latency every extra chunk helps and k* is infinite")
    D = int(n).bit_length() - 1
    b = _chunks_per_round(n) * nbytes / (2 * bandwidth)
    return max(1.0, math.sqrt((2 * D - 1) * b / alpha))


def pipelined_tree_best_time(n, nbytes, alpha, bandwidth):
    """(sqrt((2D-1) alpha) + sqrt(b))^2 seconds, b = c nbytes / (2 bandwidth), or 2D (alpha + b) when k* <= 1."""
    _check_tree(n, nbytes, alpha, bandwidth)
    if n == 1:
        return 0.0
    D = int(n).bit_length() - 1
    b = _chunks_per_round(n) * nbytes / (2 * bandwidth)
    if alpha == 0:
        return b
    if (2 * D - 1) * b <= alpha:
        return 2 * D * (alpha + b)
    return (math.sqrt((2 * D - 1) * alpha) + math.sqrt(b)) ** 2


def _check_tree(n, nbytes, alpha, bandwidth):
    if n < 1 or int(n) != n:
        raise ValueError(f"n must be a whole number of ranks >= 1, got {n}")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0 seconds, got {alpha}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")


def _chunks_per_round(n):
    """Chunks the busiest rank sends per steady-state round: 2 (n = 2), 3 (n = 3, 4), 4 (n >= 5)."""
    return 4


k_1024 = optimal_tree_chunks(1024, 16e6, 5e-6, 25e9)
t_pipe_1024 = pipelined_tree_best_time(1024, 16e6, 5e-6, 25e9)
S, a, B = 16e6, 5e-6, 25e9
print(f"n = 1024, S = 16 MB: k* = {k_1024:.1f} chunks of {S / 2 / k_1024 / 1e3:.0f} KB per tree")
print(f"  pipelined double tree {t_pipe_1024 * 1e3:7.3f} ms")
print(f"  ring                  {(2 * 1023 * a + 2 * 1023 / 1024 * S / B) * 1e3:7.3f} ms")
print(f"  binomial tree         {(20 * (a + S / B)) * 1e3:7.3f} ms")
print(f"  Rabenseifner          {(20 * a + 2 * 1023 / 1024 * S / B) * 1e3:7.3f} ms")
