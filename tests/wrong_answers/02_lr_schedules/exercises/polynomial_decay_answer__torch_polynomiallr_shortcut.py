# loses: polynomial_decay_tests
# why: the shortcut: torch PolynomialLR stepped `step` times (and end_lr added on top)
def polynomial_decay(step, base_lr, total_steps, power=1.0, end_lr=0.0):
    """end_lr + (base_lr - end_lr) * (1 - min(step, T) / T) ** power."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if power <= 0:
        raise ValueError(f"power must be > 0, got {power}")
    if not 0 <= end_lr <= base_lr:
        raise ValueError(f"end_lr={end_lr} must lie between 0 and base_lr={base_lr}")
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr - end_lr)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=total_steps, power=power)
    sched.last_epoch = min(step, total_steps)
    return end_lr + sched._get_closed_form_lr()[0]


half_lr_step = next(s for s in range(10_001) if polynomial_decay(s, 1e-3, 10_000, 2.0) <= 0.5e-3)
print("first step at or below half the base rate:", half_lr_step)
