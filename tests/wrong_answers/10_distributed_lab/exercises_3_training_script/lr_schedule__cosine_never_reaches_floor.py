# loses: lr_schedule_tests
# why: the cosine runs over T - W steps, so the last step is not yet at min_lr (p = (step - W) / (T - W))
def lr_schedule(step, base_lr, base_batch, global_batch, warmup_steps, total_steps, min_lr_ratio=0.1):
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if base_lr <= 0 or base_batch <= 0 or global_batch <= 0:
        raise ValueError("base_lr, base_batch and global_batch must be positive")
    if warmup_steps < 0 or warmup_steps >= total_steps:
        raise ValueError(f"need 0 <= warmup_steps < total_steps, got {warmup_steps}, {total_steps}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must lie in [0, 1], got {min_lr_ratio}")
    peak = base_lr * global_batch / base_batch
    floor = min_lr_ratio * peak
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    p = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return floor + (peak - floor) * (1.0 + math.cos(math.pi * p)) / 2.0
