# loses: inverse_sqrt_tests
# why: half the peak at step 4W (n = 4W means step 4W - 1)
def inverse_sqrt(step, d_model, warmup_steps):
    """Vaswani et al. 2017: d_model^-0.5 * min(n^-0.5, n * warmup^-1.5) with n = step + 1."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps must be >= 1, got {warmup_steps}")
    n = step + 1
    return d_model ** -0.5 * min(n ** -0.5, n * warmup_steps ** -1.5)


transformer_peak_lr = inverse_sqrt(4000 - 1, 512, 4000)
transformer_half_peak_step = 4 * 4000      # n^-1/2 = (1/2) W^-1/2  ->  n = 4 W
print(f"peak {transformer_peak_lr:.4g}; half of it at step {transformer_half_peak_step}")
