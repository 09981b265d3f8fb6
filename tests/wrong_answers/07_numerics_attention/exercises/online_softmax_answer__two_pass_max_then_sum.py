# loses: online_softmax_tests
# why: a two-pass softmax: collects the blocks, takes the max, then sums the exponentials
def online_softmax_stats(blocks):
    """One pass over the column blocks of the rows: returns (m, l), the row max and sum of exp(x - m)."""
    blocks = list(blocks)
    m = blocks[0].amax(dim=-1)
    for xj in blocks[1:]:                      # pass 1: the max
        m = torch.maximum(m, xj.amax(dim=-1))
    l = torch.zeros_like(m)
    for xj in blocks:                          # pass 2: the sum of exponentials
        l = l + torch.exp(xj - m[..., None]).sum(dim=-1)
    return m, l


def online_softmax(x, block_size=1):
    """softmax over the last dim from your one-pass statistics (given, not graded on its own)."""
    m, l = online_softmax_stats(x.split(block_size, dim=-1))
    return torch.exp(x - m[..., None]) / l[..., None]


print(online_softmax(torch.tensor([[1000.0, 999.0, -1000.0], [1.0, 2.0, 3.0]])))
