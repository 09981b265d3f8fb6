# loses: one_cycle_tests
# why: linear interpolation instead of torch's default cosine annealing
def one_cycle(step, max_lr, total_steps, pct_start=0.3, div_factor=25.0, final_div_factor=1e4):
    """torch OneCycleLR (cos anneal, two phases) at the 0-based step `step`."""
    if not 0 <= step < total_steps:
        raise ValueError(f"step {step} is outside the run (steps 0..{total_steps - 1})")
    up_end = pct_start * total_steps - 1
    if up_end <= 0 or up_end >= total_steps - 1:
        raise ValueError(f"pct_start * total_steps = {pct_start * total_steps} must lie strictly between 1 and total_steps")
    start_lr = max_lr / div_factor
    final_lr = start_lr / final_div_factor

    def anneal(a, b, x):
        return a + (b - a) * x

    if step <= up_end:
        return anneal(start_lr, max_lr, step / up_end)
    return anneal(max_lr, final_lr, (step - up_end) / (total_steps - 1 - up_end))


one_cycle_lrs = [one_cycle(s, 0.1, 1000) for s in range(1000)]
one_cycle_peak_step = int(np.argmax(one_cycle_lrs))
one_cycle_final_lr = one_cycle_lrs[-1]
print(f"peak at step {one_cycle_peak_step}, last rate {one_cycle_final_lr:.3g}")
