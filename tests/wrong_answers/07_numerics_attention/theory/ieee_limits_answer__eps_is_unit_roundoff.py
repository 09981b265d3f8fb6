# loses: ieee_limits_tests
# why: eps taken as the unit roundoff 2^-(M+1) instead of the spacing at 1
def ieee_limits(exponent_bits, mantissa_bits):
    """max, smallest normal, smallest subnormal and eps of an IEEE-style binary format."""
    if exponent_bits < 2:
        raise ValueError(f"exponent_bits must be >= 2, got {exponent_bits}")
    if mantissa_bits < 1:
        raise ValueError(f"mantissa_bits must be >= 1, got {mantissa_bits}")
    bias = 2 ** (exponent_bits - 1) - 1
    e_min = 1 - bias
    return {
        "max": (2.0 - 2.0 ** -mantissa_bits) * 2.0 ** bias,
        "smallest_normal": 2.0 ** e_min,
        "smallest_subnormal": 2.0 ** (e_min - mantissa_bits),
        "eps": 2.0 ** -(mantissa_bits + 1),
    }


print(ieee_limits(5, 10))
