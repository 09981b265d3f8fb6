# loses: best_interval_tests_validation
# why: only non-positive inputs are rejected: a desync rate above 1 per step is accepted
import math

def best_interval(check_cost_s, desync_rate_per_step, step_time_s):
    if min(check_cost_s, desync_rate_per_step, step_time_s) <= 0:
        raise ValueError("costs and times must be > 0 and the rate in (0, 1)")
    t = math.sqrt(2 * check_cost_s / (desync_rate_per_step * step_time_s))
    cost = lambda T: check_cost_s / T + desync_rate_per_step * step_time_s * (T + 1) / 2
    return min({max(1, math.floor(t)), max(1, math.ceil(t))}, key=cost)
