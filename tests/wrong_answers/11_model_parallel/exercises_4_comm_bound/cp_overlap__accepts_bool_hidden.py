# loses: cp_overlap_tests_validation
# why: hidden=True accepted (a bool is an int in Python)
def ring_overlap_chunk(hidden, alpha, bandwidth, peak_flops, bytes_per_element=2, causal=False, kv_hidden=None):
    for name, v in (("hidden", hidden), ("kv_hidden", hidden if kv_hidden is None else kv_hidden)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    for name, v, lo_ok in (("alpha", alpha, True), ("bandwidth", bandwidth, False),
                           ("peak_flops", peak_flops, False), ("bytes_per_element", bytes_per_element, False)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v) \
                or v < 0 or (v == 0 and not lo_ok):
            raise ValueError(f"{name} must be a finite number {'>= 0' if lo_ok else '> 0'}, got {v!r}")
    kv = hidden if kv_hidden is None else kv_hidden
    a = (2.0 if causal else 4.0) * hidden / peak_flops
    b = 2.0 * kv * bytes_per_element / bandwidth
    return (b + math.sqrt(b * b + 4 * a * alpha)) / (2 * a)


c_nvlink = ring_overlap_chunk(8192, 3e-6, 450e9, 400e12, 2, causal=True)
c_ib = ring_overlap_chunk(8192, 5e-6, 50e9, 400e12, 2, causal=True)
c_ib_gqa = ring_overlap_chunk(8192, 5e-6, 50e9, 400e12, 2, causal=True, kv_hidden=1024)
print(f"causal ring attention hides its K/V hop above {c_nvlink:,.0f} tokens per rank on NVLink, "
      f"{c_ib:,.0f} on InfiniBand, {c_ib_gqa:,.0f} on InfiniBand with 8 of 64 KV heads")
