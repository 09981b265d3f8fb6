# loses: cp_zigzag_indices_tests
# why: a striped layout (rank r holds r, r + p, r + 2p, ...) where the zig-zag one is asked for
def zigzag_indices(seq_len, p):
    for name, v in (("seq_len", seq_len), ("p", p)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if seq_len % (2 * p):
        raise ValueError(f"2p = {2 * p} chunks must divide seq_len = {seq_len}")
    h = seq_len // (2 * p)
    return [list(range(r, seq_len, p)) for r in range(p)]


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
    return [r * n * n + n * (n + 1) // 2 for r in range(p)]
