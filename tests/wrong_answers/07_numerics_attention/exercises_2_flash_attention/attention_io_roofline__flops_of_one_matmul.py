# loses: attention_io_roofline_tests
# why: counts 2 N^2 d FLOPs (Q K^T only), forgetting P V
def attention_io_roofline(seq_len, head_dim, standard_bytes, flash_bytes, peak_flops, bandwidth):
    """Byte ratio, arithmetic intensities and memory-bound verdicts of one head's attention forward."""
    def _whole(value):       # an int, or a float with a whole value (4096.0); never a bool
        return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))

    for name, value in (("seq_len", seq_len), ("head_dim", head_dim)):
        if not _whole(value) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    for name, value in (("standard_bytes", standard_bytes), ("flash_bytes", flash_bytes),
                        ("peak_flops", peak_flops), ("bandwidth", bandwidth)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    flops = 2.0 * seq_len ** 2 * head_dim
    ridge = peak_flops / bandwidth
    i_std, i_flash = flops / standard_bytes, flops / flash_bytes
    return {"ratio": standard_bytes / flash_bytes, "flops": flops, "intensity_standard": i_std,
            "intensity_flash": i_flash, "ridge": ridge, "standard_memory_bound": i_std < ridge,
            "flash_memory_bound": i_flash < ridge}


A100_PEAK, A100_BW = 312e12, 1.555e12       # fp16 tensor-core FLOP/s, HBM bytes/s (A100 40 GB)
print(attention_io_roofline(4096, 64, 1.0e8, 2.5e7, A100_PEAK, A100_BW))
