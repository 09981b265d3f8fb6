# loses: online_softmax_tests
# why: glues the blocks back into whole rows and reduces them twice (a copy of the row, not a stream)
def online_softmax_stats(blocks):
    """One pass over the column blocks of the rows: returns (m, l), the row max and sum of exp(x - m)."""
    x = torch.cat([xj for xj in blocks], dim=-1)
    m = x.amax(dim=-1)
    return m, torch.exp(x - m[..., None]).sum(dim=-1)


def online_softmax(x, block_size=1):
    """softmax over the last dim from your one-pass statistics (given, not graded on its own)."""
    m, l = online_softmax_stats(x.split(block_size, dim=-1))
    return torch.exp(x - m[..., None]) / l[..., None]


print(online_softmax(torch.tensor([[1000.0, 999.0, -1000.0], [1.0, 2.0, 3.0]])))
