# loses: cp_ring_bytes_tests
# why: the shortcut: all-gathers the whole K and V (a collective) and runs plain attention on the full sequence
def ring_attention(q, k, v, causal=False):
    rank, p = dist.get_rank(), dist.get_world_size()
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    o = torch.zeros_like(q)
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
    ks, vs = [torch.empty_like(k) for _ in range(p)], [torch.empty_like(v) for _ in range(p)]
    dist.all_gather(ks, k.contiguous())
    dist.all_gather(vs, v.contiguous())
    K, V = torch.cat(ks, dim=-2), torch.cat(vs, dim=-2)
    s = (q @ K.transpose(-2, -1)) * scale
    if causal:
        pos_q = rank * n + torch.arange(n)
        s = s.masked_fill(torch.arange(p * n)[None, :] > pos_q[:, None], float("-inf"))
    return torch.softmax(s, dim=-1) @ V
