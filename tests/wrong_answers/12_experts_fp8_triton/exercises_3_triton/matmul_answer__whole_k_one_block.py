# loses: matmul_tests
# why: K not tiled: one block of next_power_of_2(K) covers the whole inner dimension, block_k ignored
# Define your @triton.jit kernel and the wrapper matmul(a, b, block_m, block_n, block_k) here.
@triton.jit
def _matmul_kernel(A, B, C, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(A + rows[:, None] * s_am + ks[None, :] * s_ak, mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(B + ks[:, None] * s_bk + cols[None, :] * s_bn, mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(C + rows[:, None] * s_cm + cols[None, :] * s_cn, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a, b, block_m, block_n, block_k):
    for blk in (block_m, block_n, block_k):
        if not isinstance(blk, int) or blk < 16 or blk & (blk - 1):
            raise ValueError(f"block sizes must be powers of two >= 16, got {blk!r}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need a (M, K) and b (K, N), got {tuple(a.shape)} and {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                         BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=max(16, triton.next_power_of_2(K)))
    return c
