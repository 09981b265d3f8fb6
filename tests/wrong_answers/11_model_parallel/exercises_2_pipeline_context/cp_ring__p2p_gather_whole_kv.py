# loses: cp_ring_bytes_tests
# why: all-gather built from point-to-point messages: every rank sends its K/V to every other rank (the same bytes as the ring) and concatenates the whole sequence's K and V
def ring_attention(q, k, v, causal=False):
    rank, p = dist.get_rank(), dist.get_world_size()
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    o = torch.zeros_like(q)
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
    kv = torch.stack([k, v]).contiguous()
    chunks = {rank: kv}
    sends = [dist.isend(kv, dst) for dst in range(p) if dst != rank]
    for src in range(p):
        if src != rank:
            chunks[src] = torch.empty_like(kv)
            dist.recv(chunks[src], src)
    for w in sends:
        w.wait()
    K = torch.cat([chunks[r][0] for r in range(p)], dim=-2)
    V = torch.cat([chunks[r][1] for r in range(p)], dim=-2)
    s = (q @ K.transpose(-2, -1)) * scale
    if causal:
        pos_q = rank * n + torch.arange(n)
        s = s.masked_fill(torch.arange(p * n)[None, :] > pos_q[:, None], float("-inf"))
    return torch.softmax(s, dim=-1) @ V
