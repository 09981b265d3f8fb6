# loses: zb_h1_tests
# why: the floor taken as (p-1) min(t_f, t_b): the longer of the two waits is what no W can fill
def zb_h1_bubble(stages, micro_batches, t_f, t_b, t_w):
    """Idle time of each device in one ZB-H1 step (m >= p), in the unit of t_f, t_b, t_w."""
    for name, v in (("stages", stages), ("micro_batches", micro_batches)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if micro_batches < stages:
        raise ValueError(f"the ZB-H1 count needs micro_batches >= stages, got {micro_batches} < {stages}")
    for name, v in (("t_f", t_f), ("t_b", t_b), ("t_w", t_w)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v > 0:
            raise ValueError(f"{name} must be a positive time, got {v!r}")
    if t_w <= min(t_f, t_b):
        return (stages - 1) * (t_f + t_b - t_w)      # every W hides in a gap
    return (stages - 1) * min(t_f, t_b)              # the waits no W can fill


_idle = zb_h1_bubble(4, 8, 1, 1, 1)
zb_h1_fraction_4_8 = _idle / (8 * (1 + 1 + 1) + _idle)
print(f"ZB-H1, p = 4, m = 8, unit times: idle {zb_h1_bubble(4, 8, 1, 1, 1):g} per device, "
      f"idle fraction {zb_h1_fraction_4_8:.4f}")
