# loses: kv_cache_bytes_tests
# why: the grouped cache uses the group size q_heads // kv_heads instead of the kv_heads heads (equal for Llama 2 70B, 64 // 8 = 8)
def kv_cache_bytes(batch, seq_len, layers, q_heads, kv_heads, head_dim, bytes_per_element=2):
    """(multi_head, grouped): bytes of the K and V cache with q_heads and with kv_heads K, V heads."""
    per_head = 2 * batch * seq_len * layers * head_dim * bytes_per_element      # K and V
    return per_head * q_heads, per_head * (q_heads // kv_heads)


# Llama 2 70B in bf16: 80 layers, 64 query heads, 8 KV heads of dimension 128
for n_tokens, seqs in ((1, 1), (4096, 1), (4096, 16)):
    mha, gqa = kv_cache_bytes(seqs, n_tokens, 80, 64, 8, 128, 2)
    print(f"{seqs:>3} x {n_tokens:>5} tokens: multi-head {mha / 2**20:>9,.1f} MiB, grouped {gqa / 2**20:>8,.1f} MiB, "
          f"saved {(mha - gqa) / 2**20:>9,.1f} MiB")
