# loses: wsd_tests
# why: tokens before the cooldown from (1 - fraction) * total: a float, off when the fraction does not divide
def wsd(step, peak_lr, warmup_steps, total_steps, decay_fraction=0.1, min_lr=0.0, shape="linear"):
    """Warmup-stable-decay with a linear or 1-sqrt cooldown over the last decay_fraction of the run."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if shape not in ("linear", "sqrt"):
        raise ValueError(f"shape must be 'linear' or 'sqrt', got {shape!r}")
    decay = steps_from_fraction(total_steps, decay_fraction)
    if warmup_steps < 0 or warmup_steps + decay > total_steps:
        raise ValueError(f"warmup ({warmup_steps}) and cooldown ({decay}) steps do not fit in {total_steps} steps")
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    start = total_steps - decay
    if step < start:
        return peak_lr
    if step >= total_steps:
        return min_lr
    x = (step - start + 1) / decay
    f = 1 - x if shape == "linear" else 1 - math.sqrt(x)
    return min_lr + (peak_lr - min_lr) * f


def tokens_before_cooldown(total_steps, decay_fraction, tokens_per_step):
    """Tokens trained before the first cooldown step total_steps - D."""
    return (1 - decay_fraction) * total_steps * tokens_per_step


cooldown_tokens_example = tokens_before_cooldown(50_000, 0.2, 512 * 2048)
print(f"tokens before the cooldown: {cooldown_tokens_example:,} ({cooldown_tokens_example / 1e9:.2f} B)")
