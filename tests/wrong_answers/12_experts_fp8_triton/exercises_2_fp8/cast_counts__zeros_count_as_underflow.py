# loses: cast_counts_tests
# why: counts exact zeros as underflow
def cast_counts(x, dtype):
    """(overflow, underflow) of the saturating cast of x to an fp8 dtype."""
    q = fp8_cast(x, dtype).float()
    xf = x.float()
    overflow = int((xf.abs() > torch.finfo(dtype).max).sum())
    underflow = int((q == 0).sum())
    return overflow, underflow
