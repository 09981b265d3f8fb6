# loses: cross_entropy_tests
# why: log(sum(exp(z))) without the running max: exp(100) overflows fp32 and the loss is inf
# Define your @triton.jit kernel and the wrapper cross_entropy(logits, targets, block_v, ignore_index=-100) here.
@triton.jit
def _ce_kernel(Z, T, LOSS, n_cols, stride, ignore_index, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_V)
    t = tl.load(T + row)
    m = tl.full([BLOCK_V], -1e30, tl.float32)
    l = tl.zeros([BLOCK_V], tl.float32)
    z_t = tl.zeros([BLOCK_V], tl.float32)
    for start in range(0, n_cols, BLOCK_V):
        cols = start + offs
        z = tl.load(Z + row * stride + cols, mask=cols < n_cols, other=float("-inf"))
        l = l + tl.exp(z)
        z_t += tl.where(cols == t, z, 0.0)
    lse = tl.log(tl.sum(l, 0))
    tl.store(LOSS + row, tl.where(t == ignore_index, 0.0, lse - tl.sum(z_t, 0)))


def cross_entropy(logits, targets, block_v, ignore_index=-100):
    if not isinstance(block_v, int) or block_v < 16 or block_v & (block_v - 1):
        raise ValueError(f"block_v must be a power of two >= 16, got {block_v!r}")
    if logits.dim() != 2:
        raise ValueError(f"logits must be 2-D (N, V), got shape {tuple(logits.shape)}")
    if targets.dim() != 1 or targets.shape[0] != logits.shape[0] or targets.is_floating_point():
        raise ValueError(f"targets must be a 1-D integer tensor of length {logits.shape[0]}")
    loss = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
    _ce_kernel[(logits.shape[0],)](logits, targets, loss, logits.shape[1], logits.stride(0), ignore_index, BLOCK_V=block_v)
    return loss
