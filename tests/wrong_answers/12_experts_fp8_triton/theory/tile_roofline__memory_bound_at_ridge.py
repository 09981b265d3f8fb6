# loses: tile_roofline_tests
# why: calls a tile exactly at the ridge memory-bound (the spec: memory only below it)
def tile_roofline(block_m, block_n, block_k, peak_flops=989.4e12, bandwidth=3.35e12, in_bytes=2):
    """Arithmetic intensity of one K step of a tiled matmul program against a GPU's ridge point."""
    for name, v in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    for name, v in (("peak_flops", peak_flops), ("bandwidth", bandwidth), ("in_bytes", in_bytes)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{name} must be a number > 0, got {v!r}")
    intensity = 2 * block_m * block_n * block_k / ((block_m * block_k + block_k * block_n) * in_bytes)
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge": ridge, "bound": "memory" if intensity <= ridge else "compute",
            "attainable": min(peak_flops, intensity * bandwidth)}
    ### END SOLUTION
