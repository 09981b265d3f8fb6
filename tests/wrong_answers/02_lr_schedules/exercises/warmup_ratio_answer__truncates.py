# loses: warmup_ratio_tests
# why: int(): truncates instead of rounding up
def steps_from_fraction(total_steps, fraction):
    """ceil(fraction * total_steps) as an int, ignoring float noise above a whole number."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must lie in [0, 1], got {fraction}")
    x = fraction * total_steps
    return int(x)


warmup_12k = steps_from_fraction(12_000, 0.03)
lr_step_100 = 6e-4 * (100 + 1) / warmup_12k
print(f"warmup = {warmup_12k} steps, lr at step 100 = {lr_step_100:.4g}")
