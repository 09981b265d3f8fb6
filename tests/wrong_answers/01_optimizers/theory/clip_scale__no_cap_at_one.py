# loses: clip_scale_tests
# why: scale not capped at 1
def clip_scale(grads, max_norm):
    """Global 2-norm of a list of arrays and torch's clipping coefficient. Returns (total_norm, scale)."""
    total = math.sqrt(sum(float(np.sum(np.asarray(x, dtype=float) ** 2)) for x in grads))
    return total, max_norm / (total + 1e-6)
