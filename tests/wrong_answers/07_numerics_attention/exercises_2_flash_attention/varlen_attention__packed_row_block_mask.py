# loses: varlen_attention_tests
# why: attends over the whole packed row with a block-diagonal (and causal) mask: right values, T^2 scores per head instead of sum l^2
def varlen_attention(q, k, v, cu_seqlens, causal=False):
    """Attention over sequences packed end to end; cu_seqlens = [0, l1, l1 + l2, ..., T]; nothing crosses a boundary."""
    if not (q.shape[0] == k.shape[0] == v.shape[0]) or not (q.shape[1] == k.shape[1] == v.shape[1]):
        raise ValueError(f"q, k, v need the same tokens and heads, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same head dim, got {q.shape[-1]} and {k.shape[-1]}")
    cu = [int(c) for c in cu_seqlens.tolist()]
    if len(cu) < 2 or cu[0] != 0 or cu[-1] != q.shape[0]:
        raise ValueError(f"cu_seqlens must run from 0 to the {q.shape[0]} tokens, got {cu}")
    if any(b <= a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens must be strictly increasing, got {cu}")
    seq = torch.repeat_interleave(torch.arange(len(cu) - 1), torch.tensor([b - a for a, b in zip(cu, cu[1:])]))
    s = (q.transpose(0, 1) @ k.transpose(0, 1).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    masked = seq[:, None] != seq[None, :]                                 # other sequences
    if causal:
        masked = masked | torch.ones(len(seq), len(seq), dtype=torch.bool).triu(1)
    return (torch.softmax(s.masked_fill(masked, -math.inf), dim=-1) @ v.transpose(0, 1)).transpose(0, 1)


# three sequences of 3, 6 and 4 tokens packed into one row of 13: compare with each run alone
lengths_demo = [3, 6, 4]
cu_demo = torch.tensor([0, 3, 9, 13], dtype=torch.int32)
q_demo, k_demo, v_demo = (torch.randn(13, 2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(s)) for s in (5, 6, 7))
o_demo = varlen_attention(q_demo, k_demo, v_demo, cu_demo, causal=True)
alone = torch.cat([F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1) for t in (q_demo, k_demo, v_demo)), is_causal=True).transpose(0, 1)
                   for a, b in zip(cu_demo.tolist(), cu_demo.tolist()[1:])])
print(f"max |packed - each sequence alone| = {float((o_demo - alone).abs().max()):.1e}; "
      f"scores computed {sum(n * n for n in lengths_demo)} of {13 * 13} in the packed row")
