# loses: saved_bytes_formula_tests
# why: N = d + 1, where the two are equal, taken as the first N at which flash keeps strictly less
def predicted_saved_bytes(batch, heads, seq_len, head_dim, itemsize):
    """(standard, flash): bytes kept for the backward by standard attention and by FlashAttention-2."""
    rows = batch * heads * seq_len
    io = rows * head_dim
    return itemsize * (3 * io + rows * seq_len), itemsize * (4 * io + rows)


# N^2 + 3 N d > 4 N d + N  <=>  N > d + 1
flash_saves_less_from = 64 + 1
print("at N = 4096, H = 32, d = 128, bf16:", [f"{b / 2**30:.2f} GiB" for b in predicted_saved_bytes(1, 32, 4096, 128, 2)],
      "| flash saves less from N =", flash_saves_less_from)
