# loses: bubble_tests
# why: counts the step as m + p slots instead of m + p - 1
def bubble_fraction(stages, micro_batches):
    """Idle fraction of a GPipe / 1F1B step: (p - 1) / (m + p - 1)."""
    _check_pipeline(stages, micro_batches)
    return (stages - 1) / (micro_batches + stages)


def bubble_ratio(stages, micro_batches):
    """Bubble time over the ideal (bubble-free) step time: (p - 1) / m."""
    _check_pipeline(stages, micro_batches)
    return (stages - 1) / micro_batches


def _check_pipeline(stages, micro_batches):
    for name, v in (("stages", stages), ("micro_batches", micro_batches)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


tsx06_bubble = bubble_fraction(4, 12)
print(f"bubble fraction {tsx06_bubble:.3f}, bubble ratio {bubble_ratio(4, 12):.3f}")
