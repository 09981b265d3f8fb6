# loses: gqa_attention_tests
# why: delegates to scaled_dot_product_attention(enable_gqa=True), which does the grouping itself
def gqa_attention(q, k, v, causal=False):
    """Grouped-query attention: query head h uses KV head h // (H_q // H_kv); K and V are never copied per query head."""
    B, h_q, n_q, d = q.shape
    h_kv, n_k, d_v = k.shape[1], k.shape[2], v.shape[-1]
    if k.shape[0] != B or v.shape[0] != B:
        raise ValueError(f"q, k and v need the same batch size, got {q.shape[0]}, {k.shape[0]}, {v.shape[0]}")
    if v.shape[1] != h_kv or v.shape[2] != n_k:
        raise ValueError(f"k and v need the same heads and length, got {tuple(k.shape)} and {tuple(v.shape)}")
    if k.shape[-1] != d:
        raise ValueError(f"q and k need the same head dim, got {d} and {k.shape[-1]}")
    if h_q % h_kv:
        raise ValueError(f"the {h_kv} KV heads must divide the {h_q} query heads")
    mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


# decoding with a cache: 2 new queries against 48 cached keys, 8 query heads sharing 2 KV heads
q_demo, k_demo, v_demo = (torch.randn(1, h, n, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(h))
                          for h, n in ((8, 2), (2, 48), (2, 48)))
o_demo = gqa_attention(q_demo, k_demo, v_demo, causal=True)
lower_right = torch.ones(2, 48, dtype=torch.bool).tril(48 - 2)
print("max |O - SDPA(enable_gqa=True)| =",
      f"{float((o_demo - F.scaled_dot_product_attention(q_demo, k_demo, v_demo, attn_mask=lower_right, enable_gqa=True)).abs().max()):.1e}")
