# loses: layer_comm_tp_sp_tests
# why: counts a ring all-reduce as sending (t-1)/t S instead of 2 (t-1)/t S
def layer_comm_bytes(axis, batch, seq_len, hidden, degree, bytes_per_element=2, kv_hidden=None):
    """Bytes one rank sends for one layer and one micro-batch, forward + backward, along `axis`."""
    if axis not in ("tp", "sp", "pp", "cp"):
        raise ValueError(f"axis must be 'tp', 'sp', 'pp' or 'cp', got {axis!r}")
    for name, v in (("batch", batch), ("seq_len", seq_len), ("hidden", hidden), ("degree", degree)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not bytes_per_element > 0:
        raise ValueError(f"bytes_per_element must be > 0, got {bytes_per_element!r}")
    n, S = degree, batch * seq_len * hidden * bytes_per_element
    if n == 1:
        return 0.0
    if axis == "tp":
        return 4 * (n - 1) / n * S
    if axis == "sp":
        return 10 * (n - 1) / n * S
    if axis == "pp":
        return 2.0 * S
    if seq_len % n:
        raise ValueError(f"context parallelism needs degree={n} to divide seq_len={seq_len}")
    hk = hidden if kv_hidden is None else kv_hidden
    return float((6 * (n - 1) + 2) * batch * (seq_len // n) * hk * bytes_per_element)
