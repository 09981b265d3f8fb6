# loses: sgdr_tests
# why: the shortcut: torch CosineAnnealingWarmRestarts stepped `step` times
def cosine_with_restarts(step, max_lr, t0, t_mult=1, min_lr=0.0):
    """SGDR: cosine from max_lr to min_lr over cycles of t0, t0*t_mult, ... steps."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if t0 < 1 or int(t0) != t0:
        raise ValueError(f"t0 must be a whole number of steps >= 1, got {t0}")
    if t_mult < 1 or int(t_mult) != t_mult:
        raise ValueError(f"t_mult must be a whole number >= 1, got {t_mult}")
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=max_lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=int(t0), T_mult=int(t_mult), eta_min=min_lr)
    sched.step(step)  # CosineAnnealingWarmRestarts accepts the epoch directly
    return opt.param_groups[0]["lr"]


def sgdr_restarts(t0, t_mult, total_steps):
    """Steps in (0, total_steps) at which SGDR restarts at max_lr."""
    out, position, length = [], int(t0), int(t0)
    while position < total_steps:
        out.append(position)
        length *= int(t_mult)
        position += length
    return out


restarts_example = sgdr_restarts(10, 2, 200)
print("restarts:", restarts_example)
