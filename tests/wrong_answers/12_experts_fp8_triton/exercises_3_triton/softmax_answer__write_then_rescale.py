# loses: softmax_tests
# why: one read of x, but writes exp(x - m) and rescales it in a second pass over y: y is written twice and read back
# Define your @triton.jit kernel(s) and the wrapper softmax(x, block_n) here.
@triton.jit
def _softmax_kernel(X, Y, n_cols, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    m = tl.full([BLOCK_N], -1e30, tl.float32)     # running max per lane
    l = tl.zeros([BLOCK_N], tl.float32)           # running sum of exp(x - m) per lane
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offs
        x = tl.load(X + row * stride_x + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        l = l * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
        tl.store(Y + row * stride_y + cols, tl.exp(x - m_new), mask=cols < n_cols)
    m_row = tl.max(m, 0)
    l_row = tl.sum(l * tl.exp(m - m_row), 0)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offs
        x = tl.load(X + row * stride_x + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(Y + row * stride_y + cols, (tl.exp(x - m_row) / l_row).to(Y.dtype.element_ty), mask=cols < n_cols)
        tl.store(Y + row * stride_y + cols, (tl.exp(x - m_row) / l_row).to(Y.dtype.element_ty), mask=cols < n_cols)


def softmax(x, block_n):
    if not isinstance(block_n, int) or block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"block_n must be a power of two >= 16, got {block_n!r}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D, got shape {tuple(x.shape)}")
    x = x.contiguous()
    y = torch.empty_like(x)
    _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_N=block_n)
    return y
