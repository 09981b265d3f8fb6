# loses: cast_counts_tests
# why: leaves +-inf out of the overflow count (it saturates too)
def cast_counts(x, dtype):
    """(overflow, underflow) of the saturating cast of x to an fp8 dtype."""
    q = fp8_cast(x, dtype).float()
    xf = x.float()
    overflow = int(((xf.abs() > torch.finfo(dtype).max) & torch.isfinite(xf)).sum())
    underflow = int(((xf != 0) & (q == 0)).sum())
    return overflow, underflow
