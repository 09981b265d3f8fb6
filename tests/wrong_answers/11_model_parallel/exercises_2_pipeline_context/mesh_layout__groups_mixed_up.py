# loses: mesh_layout_tests
# why: the TP groups listed under 'dp_groups' and the DP groups under 'tp_groups'
def mesh_layout(dp, tp):
    for name, v in (("dp", dp), ("tp", tp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    n = dp * tp
    return {"coords": [divmod(r, tp) for r in range(n)],
            "dp_groups": [tuple(range(d * tp, (d + 1) * tp)) for d in range(dp)],
            "tp_groups": [tuple(range(t, n, tp)) for t in range(tp)]}
