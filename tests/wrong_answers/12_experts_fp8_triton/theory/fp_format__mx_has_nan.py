# loses: fp_format_tests
# why: gives the MX formats an fn-style NaN code (the MX element formats have no NaN): FP4 max 4, not 6
def fp_format(exp_bits, man_bits, kind="ieee"):
    """Bias, limits, eps and dynamic range of a binary floating-point format, from its bit layout."""
    if isinstance(exp_bits, bool) or not isinstance(exp_bits, int) or exp_bits < 2:
        raise ValueError(f"exp_bits must be an int >= 2, got {exp_bits!r}")
    if isinstance(man_bits, bool) or not isinstance(man_bits, int) or man_bits < 1:
        raise ValueError(f"man_bits must be an int >= 1, got {man_bits!r}")
    if kind not in ("ieee", "fn", "fnuz", "mx"):
        raise ValueError(f"kind must be 'ieee', 'fn', 'fnuz' or 'mx', got {kind!r}")
    e, m = exp_bits, man_bits
    bias = 2 ** (e - 1) if kind == "fnuz" else 2 ** (e - 1) - 1
    top_exponent = 2 ** e - 2 if kind == "ieee" else 2 ** e - 1
    top_mantissa = 2 ** m - 2 if kind in ("fn", "mx") else 2 ** m - 1
    max_normal = 2.0 ** (top_exponent - bias) * (1 + top_mantissa / 2 ** m)
    min_normal = 2.0 ** (1 - bias)
    min_subnormal = 2.0 ** (1 - bias - m)
    return {"bias": bias, "max_normal": max_normal, "min_normal": min_normal, "min_subnormal": min_subnormal,
            "eps": 2.0 ** -m, "binades": math.log2(max_normal / min_subnormal)}
    ### END SOLUTION
