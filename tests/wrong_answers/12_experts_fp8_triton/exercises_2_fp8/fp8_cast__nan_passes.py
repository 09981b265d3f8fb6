# loses: fp8_cast_validation
# why: lets a NaN through instead of raising ValueError
def fp8_cast(x, dtype):
    """Saturating cast of a floating-point tensor to float8_e4m3fn or float8_e5m2."""
    if dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise ValueError(f"dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype!r}")
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise ValueError(f"x must be a float16/bfloat16/float32/float64 tensor, got {getattr(x, 'dtype', type(x))}")
    fmax = torch.finfo(dtype).max
    return x.float().clamp(-fmax, fmax).to(dtype)
