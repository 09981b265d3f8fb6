# loses: warmup_cosine_tests
# why: the shortcut: the decay read from torch CosineAnnealingLR's closed form
def warmup_cosine(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """Linear warmup to peak_lr, then half a cosine that reaches min_lr at step total_steps - 1."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if warmup_steps < 0 or total_steps < 1:
        raise ValueError(f"need warmup_steps >= 0 and total_steps >= 1, got {warmup_steps}, {total_steps}")
    if warmup_steps >= total_steps:
        raise ValueError(f"warmup_steps={warmup_steps} must be shorter than total_steps={total_steps}")
    if not 0 <= min_lr <= peak_lr:
        raise ValueError(f"min_lr={min_lr} must lie between 0 and peak_lr={peak_lr}")
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    if step >= total_steps - 1:
        return min_lr
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak_lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps - warmup_steps - 1, eta_min=min_lr)
    sched.last_epoch = step - warmup_steps
    return sched._get_closed_form_lr()[0]
