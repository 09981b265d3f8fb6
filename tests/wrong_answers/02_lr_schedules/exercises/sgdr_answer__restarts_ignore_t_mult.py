# loses: sgdr_restart_tests
# why: sgdr_restarts every t0 steps, t_mult ignored
def cosine_with_restarts(step, max_lr, t0, t_mult=1, min_lr=0.0):
    """SGDR: cosine from max_lr to min_lr over cycles of t0, t0*t_mult, ... steps."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if t0 < 1 or int(t0) != t0:
        raise ValueError(f"t0 must be a whole number of steps >= 1, got {t0}")
    if t_mult < 1 or int(t_mult) != t_mult:
        raise ValueError(f"t_mult must be a whole number >= 1, got {t_mult}")
    start, length = 0, int(t0)
    while step >= start + length:
        start += length
        length *= int(t_mult)
    t = step - start
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * t / length))


def sgdr_restarts(t0, t_mult, total_steps):
    """Steps in (0, total_steps) at which SGDR restarts at max_lr."""
    out, position, length = [], int(t0), int(t0)
    while position < total_steps:
        out.append(position)
        position += length
    return out


restarts_example = sgdr_restarts(10, 2, 200)
print("restarts:", restarts_example)
