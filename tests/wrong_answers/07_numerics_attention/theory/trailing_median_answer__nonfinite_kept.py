# loses: trailing_median_tests
# why: non-finite losses stay in the window, so one nan makes the median nan
def trailing_median(losses, window):
    """median of the finite losses among the `window` steps before t; nan if none."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    x = np.asarray(losses, dtype=float)
    out = np.full(len(x), np.nan)
    for t in range(1, len(x)):
        prev = x[max(0, t - window):t]
        if prev.size:
            out[t] = np.median(prev)
    return out


print(trailing_median([5.0, 4.0, 3.0, 3.0, 3.1, 2.9, 6.0, 3.0], 3))
