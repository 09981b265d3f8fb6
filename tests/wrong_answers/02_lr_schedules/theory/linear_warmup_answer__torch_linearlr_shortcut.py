# loses: linear_warmup_tests
# why: the shortcut: torch LinearLR stepped `step` times
def linear_warmup(step, peak_lr, warmup_steps):
    """Learning rate of 0-based optimizer step `step`: peak_lr * (step + 1) / warmup_steps during
    the warmup, peak_lr afterwards."""
    if step < 0:
        raise ValueError(f"step must be >= 0 (steps count from 0), got {step}")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if warmup_steps == 0:
        return peak_lr
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak_lr)
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1 / warmup_steps, 1.0, total_iters=max(1, warmup_steps - 1))
    for _ in range(min(step, warmup_steps)):
        opt.step()
        sched.step()
    return opt.param_groups[0]["lr"]
