# loses: mesh_layout_tests
# why: DP innermost (rank = t dp + d): TP groups stride across nodes, DP groups are consecutive
def mesh_layout(dp, tp):
    for name, v in (("dp", dp), ("tp", tp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    n = dp * tp
    return {"coords": [(r % dp, r // dp) for r in range(n)],
            "tp_groups": [tuple(range(d, n, dp)) for d in range(dp)],
            "dp_groups": [tuple(range(t * dp, (t + 1) * dp)) for t in range(tp)]}
