# loses: standard_attention_hbm_bytes_tests
# why: counts S and P once each (written) instead of written and read again
def standard_attention_hbm_bytes(seq_len, head_dim, bytes_per_element=2):
    """HBM bytes loaded plus stored by Algorithm 0 (standard attention), one head's forward."""
    def _whole(value):       # an int, or a float with a whole value (4096.0); never a bool
        return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))

    for name, value in (("seq_len", seq_len), ("head_dim", head_dim)):
        if not _whole(value) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if isinstance(bytes_per_element, bool) or not isinstance(bytes_per_element, (int, float)) \
            or not math.isfinite(bytes_per_element) or bytes_per_element <= 0:
        raise ValueError(f"bytes_per_element must be a positive number, got {bytes_per_element!r}")
    n, d = int(seq_len), int(head_dim)
    loads = 2 * n * d + (n * d)      # line 1: Q, K; line 2: S; line 3: P, V
    stores = n * n + n * n + n * d                   # line 1: S; line 2: P; line 3: O
    return bytes_per_element * (loads + stores)


print(f"standard attention, N = 4096, d = 64, fp16: {standard_attention_hbm_bytes(4096, 64, 2) / 2**20:.1f} MiB per head")
