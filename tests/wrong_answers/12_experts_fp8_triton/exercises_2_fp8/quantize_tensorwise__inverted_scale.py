# loses: quantize_tensorwise_tests
# why: returns max / amax, the factor that multiplies x, not the one that turns q back into x
def quantize_tensorwise(x, dtype=torch.float8_e4m3fn):
    """Per-tensor current scaling: (q, scale) with x ~= q * scale and amax mapped to the largest normal."""
    xf = x.float()
    amax = xf.abs().max()
    scale = (torch.finfo(dtype).max / amax).float() if amax > 0 else torch.tensor(1.0)
    return fp8_cast(xf * scale, dtype), scale
