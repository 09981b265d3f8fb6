# loses: trailing_median_tests
# why: step t included in its own window
def trailing_median(losses, window):
    """median of the finite losses among the `window` steps before t; nan if none."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    x = np.asarray(losses, dtype=float)
    out = np.full(len(x), np.nan)
    for t in range(1, len(x)):
        prev = x[max(0, t - window):t + 1]
        prev = prev[np.isfinite(prev)]
        if prev.size:
            out[t] = np.median(prev)
    return out


print(trailing_median([5.0, 4.0, 3.0, 3.0, 3.1, 2.9, 6.0, 3.0], 3))
