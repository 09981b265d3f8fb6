# loses: cp_ring_bwd_comm_tests
# why: the shortcut: all-gathers the whole K and V (a collective), differentiates the whole row block at once and all-reduces dK/dV of the whole sequence
def ring_attention_backward(q, k, v, o, lse, do, causal=False):
    rank, p = dist.get_rank(), dist.get_world_size()
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    ks, vs = [torch.empty_like(k) for _ in range(p)], [torch.empty_like(v) for _ in range(p)]
    dist.all_gather(ks, k.contiguous())
    dist.all_gather(vs, v.contiguous())
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
    dist.all_reduce(dK)
    dist.all_reduce(dV)
    return dq, dK[..., rank * n:(rank + 1) * n, :].clone(), dV[..., rank * n:(rank + 1) * n, :].clone()
