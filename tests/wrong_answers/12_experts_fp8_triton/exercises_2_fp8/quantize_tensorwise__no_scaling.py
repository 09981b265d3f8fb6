# loses: quantize_tensorwise_tests
# why: casts without a scale (gradients underflow)
def quantize_tensorwise(x, dtype=torch.float8_e4m3fn):
    """Per-tensor current scaling: (q, scale) with x ~= q * scale and amax mapped to the largest normal."""
    xf = x.float()
    amax = xf.abs().max()
    scale = (amax / torch.finfo(dtype).max).float() if amax > 0 else torch.tensor(1.0)
    return fp8_cast(xf, dtype), torch.tensor(1.0)
