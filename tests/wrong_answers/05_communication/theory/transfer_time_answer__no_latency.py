# loses: transfer_time_tests
# why: transfer_time leaves out alpha: an empty message costs nothing
def transfer_time(nbytes, alpha, bandwidth):
    """alpha + nbytes / bandwidth: seconds to send nbytes over one link."""
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    if alpha < 0:
        raise ValueError(f"alpha (latency) must be >= 0 seconds, got {alpha}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")
    return nbytes / bandwidth


th09_ms = [transfer_time(gb * 1e9, 0.05e-3, 200e9) * 1e3 for gb in (0.5, 1.0, 2.0, 4.0)]
balance_bytes = 0.05e-3 * 200e9
print("times (ms):", np.round(th09_ms, 3), " balance point:", balance_bytes / 1e6, "MB")
