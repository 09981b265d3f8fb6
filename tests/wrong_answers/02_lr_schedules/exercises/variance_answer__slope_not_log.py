# loses: variance_law_tests
# why: linear slope of y against x, not of the logs
def minibatch_variance(per_example_grads, batch_size, n_draws, rng):
    """Mean over n_draws batches (rows drawn with replacement) of |batch mean - full mean|^2."""
    g = np.asarray(per_example_grads, dtype=float)
    full_mean = g.mean(axis=0)
    rows = rng.integers(0, g.shape[0], size=(n_draws, batch_size))
    diffs = g[rows].mean(axis=1) - full_mean
    return float((diffs ** 2).sum(axis=1).mean())


def loglog_slope(x, y):
    """Least-squares slope of log(y) against log(x)."""
    lx, ly = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    lx_c = lx - lx.mean()
    return float((lx_c * (ly - ly.mean())).sum() / (lx_c ** 2).sum())


variance_rng = np.random.default_rng(2026)
variances = [minibatch_variance(per_example_grads, b, 2000, variance_rng) for b in batch_sizes]
variance_slope = loglog_slope(batch_sizes, variances)
print(f"slope of log Var against log B: {variance_slope:.3f}")
