# loses: quantize_tensorwise_tests
# why: no guard for an all-zero tensor: scale 0, q NaN/0
def quantize_tensorwise(x, dtype=torch.float8_e4m3fn):
    """Per-tensor current scaling: (q, scale) with x ~= q * scale and amax mapped to the largest normal."""
    xf = x.float()
    amax = xf.abs().max()
    scale = (amax / torch.finfo(dtype).max).float()
    return fp8_cast(xf / scale, dtype), scale
