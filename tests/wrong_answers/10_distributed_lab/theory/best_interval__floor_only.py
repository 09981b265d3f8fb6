# loses: best_interval_tests
# why: floor(T*) always, without comparing the cost of the two neighbouring integers
import math

def best_interval(check_cost_s, desync_rate_per_step, step_time_s):
    if min(check_cost_s, desync_rate_per_step, step_time_s) <= 0 or desync_rate_per_step >= 1:
        raise ValueError("costs and times must be > 0 and the rate in (0, 1)")
    t = math.sqrt(2 * check_cost_s / (desync_rate_per_step * step_time_s))
    cost = lambda T: check_cost_s / T + desync_rate_per_step * step_time_s * (T + 1) / 2
    return max(1, math.floor(t))
