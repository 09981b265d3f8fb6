# loses: checkpoint_overhead_tests
# why: C / (K t) instead of C / (K t + C)
def overhead(checkpoint_s, interval_steps, step_s):
    if checkpoint_s < 0 or interval_steps <= 0 or step_s <= 0:
        raise ValueError("need checkpoint_s >= 0, interval_steps > 0, step_s > 0")
    return checkpoint_s / (interval_steps * step_s)


def wasted_fraction(interval_steps, step_s, checkpoint_s, mtbf_s):
    if interval_steps <= 0 or step_s <= 0 or mtbf_s <= 0 or checkpoint_s < 0:
        raise ValueError("need positive interval, step time and MTBF, and checkpoint_s >= 0")
    tau = interval_steps * step_s
    return checkpoint_s / tau + tau / (2 * mtbf_s)


def best_interval_steps(step_s, checkpoint_s, mtbf_s, max_steps=100_000):
    wasted_fraction(1, step_s, checkpoint_s, mtbf_s)  # validates the arguments
    K = np.arange(1, max_steps + 1)
    w = checkpoint_s / (K * step_s) + K * step_s / (2 * mtbf_s)
    return int(K[np.argmin(w)])
