# loses: clip_scale_tests
# why: total = sum of the per-array norms (not the root of the summed squares)
def clip_scale(grads, max_norm):
    """Global 2-norm of a list of arrays and torch's clipping coefficient. Returns (total_norm, scale)."""
    total = sum(math.sqrt(float(np.sum(np.asarray(x, dtype=float) ** 2))) for x in grads)
    return total, min(1.0, max_norm / (total + 1e-6))
