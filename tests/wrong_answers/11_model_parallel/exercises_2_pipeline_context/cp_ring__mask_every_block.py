# loses: cp_ring_tests
# why: causal: applies the triangular mask to every visible block, not only to the rank's own (diagonal) block
def ring_attention(q, k, v, causal=False):
    rank, p = dist.get_rank(), dist.get_world_size()
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    o = torch.zeros_like(q)
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
    kv = torch.stack([k, v]).contiguous()
    for j in range(p):
        src = (rank - j) % p
        if not (causal and src > rank):
            s = (q @ kv[0].transpose(-2, -1)) * scale
            if causal:
                s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            lse_j = torch.logsumexp(s, dim=-1)
            o_j = torch.exp(s - lse_j.unsqueeze(-1)) @ kv[1]
            o, lse = merge_partials(o, lse, o_j, lse_j)
        if j < p - 1:
            nxt = torch.empty_like(kv)
            send = dist.isend(kv, (rank + 1) % p)
            dist.recv(nxt, (rank - 1) % p)
            send.wait()
            kv = nxt
    return o
