# loses: clip_coefficient_tests, clip_coefficient_tests_validation
# why: max_norm / norm without torch's 1e-6: divides by zero for a zero gradient
def clip_coefficient(total_norm, max_norm):
    if max_norm <= 0 or total_norm < 0:
        raise ValueError("max_norm must be > 0 and total_norm >= 0")
    return min(1.0, max_norm / total_norm)
