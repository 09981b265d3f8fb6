# loses: clip_coefficient_tests
# why: norm / max_norm: the coefficient grows with the gradient
def clip_coefficient(total_norm, max_norm):
    if max_norm <= 0 or total_norm < 0:
        raise ValueError("max_norm must be > 0 and total_norm >= 0")
    return min(1.0, (total_norm + 1e-6) / max_norm)
