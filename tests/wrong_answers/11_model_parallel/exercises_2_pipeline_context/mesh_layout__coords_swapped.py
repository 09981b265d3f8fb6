# loses: mesh_layout_tests
# why: coordinates given as (t, d) instead of (d, t)
def mesh_layout(dp, tp):
    for name, v in (("dp", dp), ("tp", tp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    n = dp * tp
    return {"coords": [divmod(r, tp)[::-1] for r in range(n)],
            "tp_groups": [tuple(range(d * tp, (d + 1) * tp)) for d in range(dp)],
            "dp_groups": [tuple(range(t, n, tp)) for t in range(tp)]}
