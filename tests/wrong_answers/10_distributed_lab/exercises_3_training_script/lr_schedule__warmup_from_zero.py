# loses: lr_schedule_tests
# why: warmup gives peak*step/W (step 0 trains at lr 0), not peak*(step+1)/W as the text states
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
        return peak * step / warmup_steps
    if step >= total_steps - 1:
        return floor
    p = (step - warmup_steps) / (total_steps - warmup_steps - 1)
    return floor + (peak - floor) * (1.0 + math.cos(math.pi * p)) / 2.0
