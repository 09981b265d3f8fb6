# loses: clip_scale_tests
# why: max_norm/total without the 1e-6 (all-zero gradients divide by zero)
def clip_scale(grads, max_norm):
    """Global 2-norm of a list of arrays and torch's clipping coefficient. Returns (total_norm, scale)."""
    total = math.sqrt(sum(float(np.sum(np.asarray(x, dtype=float) ** 2)) for x in grads))
    return total, min(1.0, max_norm / total)
