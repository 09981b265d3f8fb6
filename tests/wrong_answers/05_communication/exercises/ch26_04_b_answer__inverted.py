# loses: ch26_04_b_tests
# why: Amdahl inverted: the parallel fraction kept whole and the serial part divided by n
PROFILE = {"compute": 180.0, "all_reduce": 45.0, "data": 25.0, "other": 10.0}   # ms per step


def amdahl_speedup(parallel_fraction, n):
    """1 / ((1 - p) + p / n); n = math.inf gives 1 / (1 - p)."""
    if not 0 <= parallel_fraction <= 1:
        raise ValueError(f"parallel_fraction must lie in [0, 1], got {parallel_fraction}")
    if not n >= 1:
        raise ValueError(f"n must be >= 1 worker, got {n}")
    if math.isinf(n):
        return math.inf if parallel_fraction == 1 else 1 / (1 - parallel_fraction)
    return 1 / (parallel_fraction + (1 - parallel_fraction) / n)


def amdahl_from_profile(profile, scalable, n):
    """total / (serial parts + scalable parts / n)."""
    if set(scalable) - set(profile):
        raise ValueError(f"scalable names parts not in the profile: {set(scalable) - set(profile)}")
    if not n >= 1:
        raise ValueError(f"n must be >= 1 worker, got {n}")
    total = sum(profile.values())
    par = sum(profile[k] for k in scalable)
    if math.isinf(n):
        return math.inf if par == total else total / (total - par)
    return total / (par + (total - par) / n)


bound_4 = amdahl_from_profile(PROFILE, ["compute", "all_reduce", "data"], 4)
bound_inf = amdahl_from_profile(PROFILE, ["compute", "all_reduce", "data"], math.inf)
bound_4_comm_serial = amdahl_from_profile(PROFILE, ["compute", "data"], 4)
efficiency_actual = 2.8 / 4
efficiency_bound = bound_4 / 4
print(f"Amdahl bound on 4 GPUs {bound_4:.3f}x (efficiency {efficiency_bound:.1%}), ceiling {bound_inf:.1f}x; "
      f"with a serial all-reduce {bound_4_comm_serial:.3f}x; measured 2.8x = {efficiency_actual:.0%}")
