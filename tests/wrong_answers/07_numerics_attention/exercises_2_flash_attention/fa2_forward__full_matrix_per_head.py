# loses: fa2_forward_tests
# why: no tiling: one full N x N score matrix per (batch, head), block sizes ignored, no causal tile skipped
def fa2_forward(q, k, v, block_q, block_k, causal=False):
    """FlashAttention-2 forward: returns (O, L), L the row logsumexp of the scaled scores."""
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1, got block_q={block_q}, block_k={block_k}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same head dim, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v need the same sequence length, got {k.shape[-2]} and {v.shape[-2]}")
    scale = 1.0 / math.sqrt(q.shape[-1])
    B, H, n_q, _ = q.shape
    n_k, d_v = k.shape[-2], v.shape[-1]
    O = q.new_empty(B, H, n_q, d_v)
    L = q.new_empty(B, H, n_q)
    for b in range(B):
        for h in range(H):
            s = (q[b, h] @ k[b, h].T) * scale
            if causal:
                future = torch.arange(n_k)[None, :] > torch.arange(n_q)[:, None]
                s = s.masked_fill(future, -math.inf)
            m = s.amax(dim=-1)
            p = torch.exp(s - m[:, None])
            l = p.sum(dim=-1)
            O[b, h] = (p @ v[b, h]) / l[:, None]
            L[b, h] = m + torch.log(l)
    return O, L


q_demo, k_demo, v_demo = random_qkv(2, 3, 21, 21, 8, seed=1)
for causal in (False, True):
    o_demo, L_demo = fa2_forward(q_demo, k_demo, v_demo, 5, 4, causal=causal)
    print(f"causal={causal!s:5}  max |O - SDPA| = "
          f"{float((o_demo - F.scaled_dot_product_attention(q_demo, k_demo, v_demo, is_causal=causal)).abs().max()):.2e}")
