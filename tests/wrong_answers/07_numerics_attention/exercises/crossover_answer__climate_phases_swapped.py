# loses: crossover_tests
# why: climate_ratio_saved and climate_ratio_forward swapped
from solutions_lib import upstream


def crossover_seq_len(d_model, heads):
    """Smallest whole s with backward savings ratio > 2."""
    # (7 s d + 3 h s^2) > 2 (8 s d + 2 h s)  <=>  s > 3 d / h + 4 / 3
    return math.floor(3 * d_model / heads + 4 / 3) + 1


climate_s_star = crossover_seq_len(1536, 24)
_c = upstream.AttentionBenchmark(1, 2048, 1536, 24)
climate_ratio_backward = _c.savings_ratio("backward")
climate_ratio_saved = _c.savings_ratio("forward")
climate_ratio_forward = _c.savings_ratio("saved")
print(f"s* = {climate_s_star};  at s = 2048: backward {climate_ratio_backward:.1f}x, saved {climate_ratio_saved:.1f}x, "
      f"forward {climate_ratio_forward:.1f}x (reported: 11.1x)")
