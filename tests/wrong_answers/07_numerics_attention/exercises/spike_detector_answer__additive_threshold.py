# loses: spike_detector_tests
# why: the seed notes' additive rule median + 0.20 instead of a factor
def detect_loss_spikes(losses, window=50, factor=1.3, warmup=None):
    """Steps t with L_t > factor * median of the `window` previous finite losses."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if not factor > 1:
        raise ValueError(f"factor must be > 1, got {factor}")
    if warmup is None:
        warmup = window
    if warmup < 1:
        raise ValueError(f"warmup must be >= 1, got {warmup}")
    x = np.asarray(losses, dtype=float)
    flagged = []
    for t in range(len(x)):
        if not np.isfinite(x[t]):
            flagged.append(t)
            continue
        if t < warmup:
            continue
        prev = x[max(0, t - window):t]
        prev = prev[np.isfinite(prev)]
        if prev.size and x[t] > np.median(prev) + 0.20:
            flagged.append(t)
    return flagged


example_losses, example_spikes = simulate_loss_trace(n_steps=1500, seed=84, n_spikes=5)
example_flags = detect_loss_spikes(example_losses)
print("planted:", example_spikes)
print("flagged:", example_flags, " precision, recall =", spike_detection_scores(example_flags, example_spikes))
