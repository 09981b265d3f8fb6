# loses: flash_attention_tests
# why: FA1's parallelism: one program per (batch, head) looping over query blocks, B*H programs instead of one per query block
# Define your @triton.jit kernel and the wrapper flash_attention(q, k, v, causal, block_m, block_n) here.
@triton.jit
def _fa2_fwd_kernel(Q, K, V, O, L, scale, S_Q, S_K, D, DV, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    for pid_m in range(0, tl.cdiv(S_Q, BLOCK_M)):
        _fa2_block(Q, K, V, O, L, scale, S_Q, S_K, D, DV, CAUSAL, BLOCK_M, BLOCK_N, BLOCK_D, BLOCK_DV, pid_m, bh)


@triton.jit
def _fa2_block(Q, K, V, O, L, scale, S_Q, S_K, D, DV, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, pid_m, bh):
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    row_ok = rows < S_Q
    q = tl.load(Q + bh * S_Q * D + rows[:, None] * D + offs_d[None, :], mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
    m = tl.full([BLOCK_M], -1e30, tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    hi = S_K
    if CAUSAL:
        hi = tl.minimum(S_K, (pid_m + 1) * BLOCK_M)
    for start in range(0, hi, BLOCK_N):
        cols = start + offs_n
        col_ok = cols < S_K
        k = tl.load(K + bh * S_K * D + cols[:, None] * D + offs_d[None, :], mask=col_ok[:, None] & (offs_d[None, :] < D), other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        ok = col_ok[None, :] & row_ok[:, None]
        if CAUSAL:
            ok = ok & (cols[None, :] <= rows[:, None])
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(V + bh * S_K * DV + cols[:, None] * DV + offs_dv[None, :], mask=col_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m = m_new
    l_safe = tl.where(l > 0, l, 1.0)
    tl.store(O + bh * S_Q * DV + rows[:, None] * DV + offs_dv[None, :], acc / l_safe[:, None],
             mask=row_ok[:, None] & (offs_dv[None, :] < DV))
    tl.store(L + bh * S_Q + rows, m + tl.log(l_safe), mask=row_ok)


def flash_attention(q, k, v, causal, block_m, block_n):
    for blk in (block_m, block_n):
        if not isinstance(blk, int) or blk < 16 or blk & (blk - 1):
            raise ValueError(f"block sizes must be powers of two >= 16, got {blk!r}")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.shape[:2] != k.shape[:2] or q.shape[:2] != v.shape[:2] \
            or q.shape[3] != k.shape[3] or k.shape[2] != v.shape[2]:
        raise ValueError(f"shapes do not fit: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError("causal attention needs S_q == S_k")
    B, H, S_q, d = q.shape
    S_k, d_v = k.shape[2], v.shape[3]
    o = torch.empty(B, H, S_q, d_v, dtype=torch.float32, device=q.device)
    lse = torch.empty(B, H, S_q, dtype=torch.float32, device=q.device)
    pad = lambda n: max(16, triton.next_power_of_2(n))
    _fa2_fwd_kernel[(B * H,)](q, k, v, o, lse, 1.0 / math.sqrt(d), S_q, S_k, d, d_v,
                                                        CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n,
                                                        BLOCK_D=pad(d), BLOCK_DV=pad(d_v))
    return o, lse
