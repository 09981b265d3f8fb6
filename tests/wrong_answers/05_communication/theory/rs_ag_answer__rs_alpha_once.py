# loses: rs_ag_tests
# why: reduce-scatter pays one latency instead of n-1
def reduce_scatter_time(n, nbytes, alpha, bandwidth):
    """(n-1) alpha + (n-1)/n * nbytes / bandwidth seconds."""
    _check(n, nbytes, alpha, bandwidth)
    return (alpha if n > 1 else 0.0) + (n - 1) / n * nbytes / bandwidth


def all_gather_time(n, nbytes, alpha, bandwidth):
    """(n-1) alpha + (n-1)/n * nbytes / bandwidth seconds (nbytes = the gathered size)."""
    _check(n, nbytes, alpha, bandwidth)
    return (n - 1) * alpha + (n - 1) / n * nbytes / bandwidth


def _check(n, nbytes, alpha, bandwidth):
    if n < 1 or int(n) != n:
        raise ValueError(f"n must be a whole number of ranks >= 1, got {n}")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0 seconds, got {alpha}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")


S_7b, n_dp = 14e9, 64
ddp_bytes_per_rank = 2 * (n_dp - 1) / n_dp * S_7b
fsdp_bytes_per_rank = 3 * (n_dp - 1) / n_dp * S_7b
print(f"DDP {ddp_bytes_per_rank / 1e9:.2f} GB, FSDP {fsdp_bytes_per_rank / 1e9:.2f} GB per rank and step")
