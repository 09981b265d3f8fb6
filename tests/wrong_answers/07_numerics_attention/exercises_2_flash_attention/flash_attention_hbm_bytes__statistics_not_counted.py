# loses: flash_attention_hbm_bytes_tests
# why: each outer iteration charged Q and O only, not the row statistics l and m
def flash_attention_hbm_bytes(seq_len, head_dim, sram_elements, bytes_per_element=2):
    """HBM bytes loaded plus stored by Algorithm 1 (FlashAttention), one head's forward."""
    def _whole(value):       # an int, or a float with a whole value (4096.0); never a bool
        return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))

    for name, value in (("seq_len", seq_len), ("head_dim", head_dim), ("sram_elements", sram_elements)):
        if not _whole(value) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if isinstance(bytes_per_element, bool) or not isinstance(bytes_per_element, (int, float)) \
            or not math.isfinite(bytes_per_element) or bytes_per_element <= 0:
        raise ValueError(f"bytes_per_element must be a positive number, got {bytes_per_element!r}")
    n, d, m = int(seq_len), int(head_dim), int(sram_elements)
    if m < 4 * d:
        raise ValueError(f"sram_elements = {m} cannot hold one row each of Q, K, V and O (4 d = {4 * d})")
    b_c = -(-m // (4 * d))              # ceil(M / 4d)
    t_c = -(-n // b_c)                  # ceil(N / B_c) outer iterations
    per_outer = (2 * n * d) + (n * d)   # load Q, O, l, m; store O, l, m
    return bytes_per_element * (2 * n * d + t_c * per_outer)


SRAM_100K = 100 * 1024 // 2        # 100 KiB of SRAM in fp16 elements: 51,200
print(f"FlashAttention, N = 4096, d = 64, M = {SRAM_100K:,} elements, fp16: "
      f"{flash_attention_hbm_bytes(4096, 64, SRAM_100K, 2) / 2**20:.1f} MiB per head")
