# loses: fa2_backward_tests
# why: causal: computes every tile (5 matmuls each) and relies on the mask instead of skipping the future
def fa2_backward(q, k, v, o, L, do, block_q, block_k, causal=False):
    """FlashAttention-2 backward from the forward's O and L: returns (dq, dk, dv)."""
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1, got block_q={block_q}, block_k={block_k}")
    out_shape = (*q.shape[:3], v.shape[-1])
    if tuple(o.shape) != out_shape or tuple(do.shape) != out_shape:
        raise ValueError(f"o and do must have shape {out_shape}, got {tuple(o.shape)} and {tuple(do.shape)}")
    if tuple(L.shape) != tuple(q.shape[:3]):
        raise ValueError(f"L must have shape {tuple(q.shape[:3])}, got {tuple(L.shape)}")
    scale = 1.0 / math.sqrt(q.shape[-1])
    n_q, n_k = q.shape[2], k.shape[2]
    shift = n_k - n_q                              # bottom-right causal: query i sees keys j <= i + shift
    D = (do * o).sum(dim=-1)                       # (B, H, n_q) = rowsum(P * dP)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for j0 in range(0, n_k, block_k):              # outer loop: key/value blocks (Algorithm 2)
        kj, vj = k[:, :, j0:j0 + block_k], v[:, :, j0:j0 + block_k]
        cols = kj.shape[2]
        dk_j, dv_j = torch.zeros_like(kj), torch.zeros_like(vj)
        for i0 in range(0, n_q, block_q):          # inner loop: query blocks
            rows = min(block_q, n_q - i0)
            qi, doi = q[:, :, i0:i0 + rows], do[:, :, i0:i0 + rows]
            s = (qi @ kj.transpose(-1, -2)) * scale
            if causal and j0 + cols - 1 > i0 + shift:
                future = torch.arange(j0, j0 + cols)[None, :] > torch.arange(i0 + shift, i0 + shift + rows)[:, None]
                s = s.masked_fill(future, -math.inf)
            p = torch.exp(s - L[:, :, i0:i0 + rows, None])       # recomputed, exactly normalised
            dv_j += p.transpose(-1, -2) @ doi
            dp = doi @ vj.transpose(-1, -2)
            ds = p * (dp - D[:, :, i0:i0 + rows, None])
            dq[:, :, i0:i0 + rows] += (ds @ kj) * scale
            dk_j += (ds.transpose(-1, -2) @ qi) * scale
        dk[:, :, j0:j0 + cols] = dk_j
        dv[:, :, j0:j0 + cols] = dv_j
    return dq, dk, dv


q_demo, k_demo, v_demo = random_qkv(2, 2, 21, 21, 8, seed=2, requires_grad=True)
do_demo = torch.randn(2, 2, 21, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
for causal in (False, True):
    with torch.no_grad():
        o_demo, L_demo = fa2_forward(q_demo, k_demo, v_demo, 5, 4, causal=causal)
        mine = fa2_backward(q_demo, k_demo, v_demo, o_demo, L_demo, do_demo, 5, 4, causal=causal)
    torch_grads = torch.autograd.grad(plain_attention(q_demo, k_demo, v_demo, causal), (q_demo, k_demo, v_demo), do_demo)
    errs = [float((a - b).abs().max()) for a, b in zip(mine, torch_grads)]
    print(f"causal={causal!s:5}  max |difference| from autograd: dq {errs[0]:.1e}, dk {errs[1]:.1e}, dv {errs[2]:.1e}")
