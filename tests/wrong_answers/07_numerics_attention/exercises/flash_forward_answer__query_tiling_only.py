# loses: flash_forward_tests
# why: tiles only the queries: each query block gets a plain (max, exp, sum) softmax over all keys at once
def flash_attention_forward(q, k, v, block_size, causal=False, scale=None):
    """Tiled exact attention; returns (out, row logsumexp)."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same head dim, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v need the same sequence length, got {k.shape[-2]} and {v.shape[-2]}")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s_q, s_k = q.shape[2], k.shape[2]
    outs, lses = [], []
    for qs in range(0, s_q, block_size):
        qi = q[:, :, qs:qs + block_size]
        n = qi.shape[2]
        m = torch.full(qi.shape[:3], -math.inf, dtype=q.dtype)
        l = torch.zeros(qi.shape[:3], dtype=q.dtype)
        acc = torch.zeros(*qi.shape[:3], v.shape[-1], dtype=q.dtype)
        rows = torch.arange(qs, qs + n)[:, None]
        s = (qi @ k.transpose(-1, -2)) * scale          # the block's scores against ALL keys
        if causal:
            cols = torch.arange(s_k)[None, :]
            s = s.masked_fill(cols > rows, -math.inf)
        m = s.max(dim=-1).values
        p = torch.exp(s - m[..., None])
        l = p.sum(dim=-1)
        acc = p @ v
        outs.append(acc / l[..., None])
        lses.append(m + torch.log(l))
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


qd, kd, vd = (torch.randn(1, 2, 10, 4) for _ in range(3))
o_demo, lse_demo = flash_attention_forward(qd, kd, vd, 3, causal=True)
print("max |difference| from scaled_dot_product_attention:",
      float((o_demo - F.scaled_dot_product_attention(qd, kd, vd, is_causal=True)).abs().max()))
