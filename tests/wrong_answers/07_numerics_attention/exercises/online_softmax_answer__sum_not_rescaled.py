# loses: online_softmax_tests
# why: the running sum is not rescaled by exp(m_old - m_new) when the max grows
def online_softmax_stats(blocks):
    """One pass over the column blocks of the rows: returns (m, l), the row max and sum of exp(x - m)."""
    m = l = None
    for xj in blocks:
        if m is None:
            m = torch.full(xj.shape[:-1], -math.inf, dtype=xj.dtype)
            l = torch.zeros(xj.shape[:-1], dtype=xj.dtype)
        m_new = torch.maximum(m, xj.amax(dim=-1))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # rows still all -inf
        l = l + torch.exp(xj - m_safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def online_softmax(x, block_size=1):
    """softmax over the last dim from your one-pass statistics (given, not graded on its own)."""
    m, l = online_softmax_stats(x.split(block_size, dim=-1))
    return torch.exp(x - m[..., None]) / l[..., None]


print(online_softmax(torch.tensor([[1000.0, 999.0, -1000.0], [1.0, 2.0, 3.0]])))
