# loses: largest_exp_bound_head_dim_tests
# why: floor(F / 4E): at a whole ratio k returns k, where the roofs are equal, not exp-bound
def largest_exp_bound_head_dim(peak_flops, exp_per_second):
    """The largest whole head dim d whose exponentials take strictly longer than its matmuls (0 if none)."""
    for name, value in (("peak_flops", peak_flops), ("exp_per_second", exp_per_second)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    # S / E > 4 d S / F  <=>  d < F / (4 E); exact on the given floats, so a whole ratio k gives k - 1
    from fractions import Fraction
    ratio = Fraction(peak_flops) / (4 * Fraction(exp_per_second))
    return max(0, math.floor(ratio))


for name, peak in (("BF16", H100_BF16), ("FP8", H100_FP8), ("A100 FP16", 312e12)):
    rate = 2.4e12 if name.startswith("A100") else H100_EXP
    print(f"{name}: the exponentials bind for d <= {largest_exp_bound_head_dim(peak, rate)}")

