# loses: straggler_tests
# why: H_n replaced by ln n + 0.5772: the approximation, not the expected maximum
def expected_step_time(t_base, mean_delay, n):
    """t_base + mean_delay * H_n: expected max of n ranks with exponential delays."""
    if n < 1 or int(n) != n:
        raise ValueError(f"n must be a whole number of ranks >= 1, got {n}")
    if t_base < 0 or mean_delay < 0:
        raise ValueError("t_base and mean_delay must be >= 0")
    harmonic = math.log(n) + 0.5772156649
    return t_base + mean_delay * harmonic


slowdown_1024 = expected_step_time(0.200, 0.005, 1024) / (0.200 + 0.005)
step_one_slow = max([0.200] * 1023 + [0.230])
print(f"slowdown at 1024 ranks: {slowdown_1024:.4f}; one slow rank: step = {step_one_slow * 1e3:.0f} ms")
