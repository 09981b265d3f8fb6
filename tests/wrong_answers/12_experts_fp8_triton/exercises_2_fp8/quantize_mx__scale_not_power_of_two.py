# loses: quantize_mx_tests
# why: X = amax / 448 per block: not an E8M0 power of two
def quantize_mx(x, block=32, dtype=torch.float8_e4m3fn):
    """MX block scaling along the last dim: (q, scales), one power-of-two scale per block."""
    if isinstance(block, bool) or not isinstance(block, int) or block < 1 or x.shape[-1] % block:
        raise ValueError(f"block must be a whole number >= 1 that divides the last dim {x.shape[-1]}, got {block!r}")
    emax = 8 if dtype == torch.float8_e4m3fn else 15
    xb = x.float().reshape(*x.shape[:-1], x.shape[-1] // block, block)
    amax = xb.abs().amax(dim=-1)
    scales = torch.where(amax > 0, amax, torch.ones_like(amax)) / torch.finfo(dtype).max
    q = fp8_cast(xb / scales.unsqueeze(-1), dtype).reshape(x.shape)
    return q, scales
