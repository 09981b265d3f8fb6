# loses: ch26_01_b_tests
# why: bandwidth term (n-1)/n S/B: only the reduce-scatter half of the ring
def ring_allreduce_time(n, nbytes, alpha, bandwidth):
    """2(n-1) alpha + 2 (n-1)/n * nbytes / bandwidth seconds."""
    if n < 1 or int(n) != n:
        raise ValueError(f"n must be a whole number of ranks >= 1, got {n}")
    if nbytes < 0 or alpha < 0:
        raise ValueError(f"nbytes and alpha must be >= 0, got {nbytes} and {alpha}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")
    return 2 * (n - 1) * alpha + (n - 1) / n * nbytes / bandwidth


GRAD_BYTES, ALPHA, STEP = 100e6, 10e-6, 0.250
t_8_nvlink = ring_allreduce_time(8, GRAD_BYTES, ALPHA, 50e9)
frac_8_nvlink = t_8_nvlink / STEP
print(f"8 GPUs, NVLink: {t_8_nvlink * 1e3:.3f} ms = {frac_8_nvlink:.2%} of the step")
