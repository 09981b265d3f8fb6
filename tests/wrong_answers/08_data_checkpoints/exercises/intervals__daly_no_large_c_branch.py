# loses: intervals_tests
# why: no C >= 2M branch: the expansion is used where it does not hold
def young_interval(checkpoint_s, mtbf_s):
    if checkpoint_s <= 0 or mtbf_s <= 0:
        raise ValueError("times must be > 0")
    return math.sqrt(2 * checkpoint_s * mtbf_s)


def daly_interval(checkpoint_s, mtbf_s):
    if checkpoint_s <= 0 or mtbf_s <= 0:
        raise ValueError("times must be > 0")
    r = checkpoint_s / (2 * mtbf_s)
    return math.sqrt(2 * checkpoint_s * mtbf_s) * (1 + math.sqrt(r) / 3 + r / 9) - checkpoint_s


def adaptive_interval(checkpoint_s, p_terminate, window_s):
    if not 0 < p_terminate < 1 or window_s <= 0:
        raise ValueError("need 0 < p_terminate < 1 and window_s > 0")
    hazard = -math.log1p(-p_terminate) / window_s
    return young_interval(checkpoint_s, 1.0 / hazard)
