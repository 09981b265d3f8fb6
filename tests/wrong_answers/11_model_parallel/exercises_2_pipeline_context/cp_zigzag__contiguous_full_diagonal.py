# loses: cp_zigzag_pairs_tests
# why: contiguous: counts the whole diagonal block (r + 1) n^2, the scores evaluated, not the useful causal pairs
def zigzag_indices(seq_len, p):
    for name, v in (("seq_len", seq_len), ("p", p)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if seq_len % (2 * p):
        raise ValueError(f"2p = {2 * p} chunks must divide seq_len = {seq_len}")
    h = seq_len // (2 * p)
    return [list(range(r * h, (r + 1) * h)) + list(range((2 * p - 1 - r) * h, (2 * p - r) * h)) for r in range(p)]


def causal_pairs_per_rank(seq_len, p, layout):
    if layout == "zigzag":
        return [sum(a + 1 for a in positions) for positions in zigzag_indices(seq_len, p)]
    if layout != "contiguous":
        raise ValueError(f"layout must be 'contiguous' or 'zigzag', got {layout!r}")
    for name, v in (("seq_len", seq_len), ("p", p)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if seq_len % p:
        raise ValueError(f"p = {p} must divide seq_len = {seq_len}")
    n = seq_len // p
    return [(r + 1) * n * n for r in range(p)]
