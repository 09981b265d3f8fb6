# loses: fp_format_tests
# why: the shortcut: looks the limits up in torch.finfo (wrong for formats torch lacks, and finfo's e5m2fnuz eps is 0.125)
def fp_format(exp_bits, man_bits, kind="ieee"):
    """Bias, limits, eps and dynamic range of a binary floating-point format, from its bit layout."""
    if isinstance(exp_bits, bool) or not isinstance(exp_bits, int) or exp_bits < 2:
        raise ValueError(f"exp_bits must be an int >= 2, got {exp_bits!r}")
    if isinstance(man_bits, bool) or not isinstance(man_bits, int) or man_bits < 1:
        raise ValueError(f"man_bits must be an int >= 1, got {man_bits!r}")
    if kind not in ("ieee", "fn", "fnuz", "mx"):
        raise ValueError(f"kind must be 'ieee', 'fn', 'fnuz' or 'mx', got {kind!r}")
    import torch
    known = {(8, 23, "ieee"): torch.float32, (5, 10, "ieee"): torch.float16, (8, 7, "ieee"): torch.bfloat16,
             (4, 3, "fn"): torch.float8_e4m3fn, (5, 2, "ieee"): torch.float8_e5m2,
             (4, 3, "fnuz"): torch.float8_e4m3fnuz, (5, 2, "fnuz"): torch.float8_e5m2fnuz}
    dtype = known.get((exp_bits, man_bits, kind), torch.float8_e4m3fn)
    fi = torch.finfo(dtype)
    sub = fi.smallest_normal * fi.eps
    return {"bias": 2 ** (exp_bits - 1) - 1, "max_normal": fi.max, "min_normal": fi.smallest_normal,
            "min_subnormal": sub, "eps": fi.eps, "binades": math.log2(fi.max / sub)}
