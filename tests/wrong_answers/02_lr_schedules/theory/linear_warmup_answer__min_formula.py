# loses: linear_warmup_tests
# why: peak * min(1, (step + 1) / W): divides by zero when there is no warmup
def linear_warmup(step, peak_lr, warmup_steps):
    """Learning rate of 0-based optimizer step `step`: peak_lr * (step + 1) / warmup_steps during
    the warmup, peak_lr afterwards."""
    if step < 0:
        raise ValueError(f"step must be >= 0 (steps count from 0), got {step}")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    return peak_lr * min(1.0, (step + 1) / warmup_steps)
