# loses: cp_ring_bwd_comm_tests
# why: the shortcut by messages: passes K and V around the ring only to collect the whole sequence's K and V on every rank, differentiates the whole row block at once and sends each chunk's dK/dV straight to its owner
def ring_attention_backward(q, k, v, o, lse, do, causal=False):
    rank, p = dist.get_rank(), dist.get_world_size()
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    ks, vs = [None] * p, [None] * p
    ks[rank], vs[rank] = k, v
    kv = torch.stack([k, v]).contiguous()
    for j in range(1, p):               # collect every chunk, in order of owner
        nxt = torch.empty_like(kv)
        send = dist.isend(kv, (rank + 1) % p)
        dist.recv(nxt, (rank - 1) % p)
        send.wait()
        kv = nxt
        ks[(rank - j) % p], vs[(rank - j) % p] = kv[0], kv[1]
    K, V = torch.cat(ks, dim=-2), torch.cat(vs, dim=-2)
    s = (q @ K.transpose(-2, -1)) * scale
    if causal:
        pos_q = rank * n + torch.arange(n)
        s = s.masked_fill(torch.arange(p * n)[None, :] > pos_q[:, None], float("-inf"))
    P = torch.exp(s - lse.unsqueeze(-1))
    D = (do * o).sum(-1, keepdim=True)
    dS = P * (do @ V.transpose(-2, -1) - D)
    dq = (dS @ K) * scale
    dK = (dS.transpose(-2, -1) @ q) * scale
    dV = P.transpose(-2, -1) @ do
    mine = [torch.stack([dK[..., rank * n:(rank + 1) * n, :], dV[..., rank * n:(rank + 1) * n, :]])]
    sends = [dist.isend(torch.stack([dK[..., r * n:(r + 1) * n, :], dV[..., r * n:(r + 1) * n, :]]).contiguous(), r)
             for r in range(p) if r != rank]
    for r in range(p):
        if r != rank:
            got = torch.empty_like(mine[0])
            dist.recv(got, r)
            mine.append(got)
    for w in sends:
        w.wait()
    total = sum(mine)
    return dq, total[0], total[1]
