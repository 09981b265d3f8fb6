# loses: quantize_mx_tests
# why: rounds the exponent of amax / max up (no clipping) instead of the OCP v1.0 rule floor(log2 amax) - emax
def quantize_mx(x, block=32, dtype=torch.float8_e4m3fn):
    """MX block scaling along the last dim: (q, scales), one power-of-two scale per block."""
    if isinstance(block, bool) or not isinstance(block, int) or block < 1 or x.shape[-1] % block:
        raise ValueError(f"block must be a whole number >= 1 that divides the last dim {x.shape[-1]}, got {block!r}")
    emax = 8 if dtype == torch.float8_e4m3fn else 15
    xb = x.float().reshape(*x.shape[:-1], x.shape[-1] // block, block)
    amax = xb.abs().amax(dim=-1)
    exponent = torch.ceil(torch.log2(torch.where(amax > 0, amax, torch.ones_like(amax)) / torch.finfo(dtype).max))
    scales = torch.pow(2.0, exponent)
    q = fp8_cast(xb / scales.unsqueeze(-1), dtype).reshape(x.shape)
    return q, scales
