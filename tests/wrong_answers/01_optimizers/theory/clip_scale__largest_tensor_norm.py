# loses: clip_scale_tests
# why: total norm = the largest per-array norm instead of the global norm
def clip_scale(grads, max_norm):
    """Global 2-norm of a list of arrays and torch's clipping coefficient. Returns (total_norm, scale)."""
    total = max(math.sqrt(float(np.sum(np.asarray(x, dtype=float) ** 2))) for x in grads)
    return total, min(1.0, max_norm / (total + 1e-6))
