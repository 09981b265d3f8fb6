# loses: cast_counts_tests
# why: counts |x| < smallest subnormal as underflow, though values above half of it round up, not to 0
def cast_counts(x, dtype):
    """(overflow, underflow) of the saturating cast of x to an fp8 dtype."""
    q = fp8_cast(x, dtype).float()
    xf = x.float()
    overflow = int((xf.abs() > torch.finfo(dtype).max).sum())
    underflow = int(((xf != 0) & (xf.abs() < 2.0 ** (-9 if dtype == torch.float8_e4m3fn else -16))).sum())
    return overflow, underflow
