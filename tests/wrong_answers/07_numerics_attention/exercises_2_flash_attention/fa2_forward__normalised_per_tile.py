# loses: fa2_forward_tests
# why: normalises each tile by its own sum (concatenated softmaxes), no running statistics across key blocks
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
    shift = n_k - n_q                            # bottom-right causal: query i sees keys j <= i + shift
    O = q.new_empty(B, H, n_q, d_v)
    L = q.new_empty(B, H, n_q)
    for i0 in range(0, n_q, block_q):
        qi = q[:, :, i0:i0 + block_q]
        rows = qi.shape[2]
        m = q.new_full((B, H, rows), -math.inf)
        l = q.new_zeros(B, H, rows)
        acc = q.new_zeros(B, H, rows, d_v)
        for j0 in range(0, n_k, block_k):
            if causal and j0 > i0 + rows - 1 + shift:      # the whole tile lies in the future: skip it
                break
            kj, vj = k[:, :, j0:j0 + block_k], v[:, :, j0:j0 + block_k]
            cols = kj.shape[2]
            s = (qi @ kj.transpose(-1, -2)) * scale
            if causal and j0 + cols - 1 > i0 + shift:      # the tile crosses the diagonal
                future = torch.arange(j0, j0 + cols)[None, :] > torch.arange(i0 + shift, i0 + shift + rows)[:, None]
                s = s.masked_fill(future, -math.inf)
            m_new = torch.maximum(m, s.amax(dim=-1))
            p = torch.exp(s - m_new[..., None])
            c = torch.exp(m - m_new)
            l = c * l + p.sum(dim=-1)
            acc = c[..., None] * acc + (p / p.sum(dim=-1, keepdim=True)) @ vj
            m = m_new
        O[:, :, i0:i0 + rows] = acc / acc.new_tensor(-(-n_k // block_k))
        L[:, :, i0:i0 + rows] = m + torch.log(l)
    return O, L


q_demo, k_demo, v_demo = random_qkv(2, 3, 21, 21, 8, seed=1)
for causal in (False, True):
    o_demo, L_demo = fa2_forward(q_demo, k_demo, v_demo, 5, 4, causal=causal)
    print(f"causal={causal!s:5}  max |O - SDPA| = "
          f"{float((o_demo - F.scaled_dot_product_attention(q_demo, k_demo, v_demo, is_causal=causal)).abs().max()):.2e}")
# N_q < N_k, causal: the 9 queries are the last 9 of the 21 positions (bottom-right)
q9 = q_demo[:, :, -9:]
o_demo, _ = fa2_forward(q9, k_demo, v_demo, 4, 5, causal=True)
lower_right = torch.ones(9, 21, dtype=torch.bool).tril(21 - 9)
print("N_q = 9, N_k = 21, causal: max |O - SDPA(bottom-right mask)| = "
      f"{float((o_demo - F.scaled_dot_product_attention(q9, k_demo, v_demo, attn_mask=lower_right)).abs().max()):.2e}")
