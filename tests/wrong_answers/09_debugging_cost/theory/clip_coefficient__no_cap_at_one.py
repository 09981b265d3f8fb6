# loses: clip_coefficient_tests
# why: no min(1, .): small gradients are scaled UP to max_norm
def clip_coefficient(total_norm, max_norm):
    if max_norm <= 0 or total_norm < 0:
        raise ValueError("max_norm must be > 0 and total_norm >= 0")
    return max_norm / (total_norm + 1e-6)
