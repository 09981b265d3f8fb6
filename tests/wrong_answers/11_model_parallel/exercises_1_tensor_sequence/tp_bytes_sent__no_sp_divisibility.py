# loses: tp_bytes_sent_validation
# why: no ValueError when t does not divide seq_len under SP
def tp_bytes_sent_per_layer(batch, seq_len, hidden, tp, sequence_parallel=False, bytes_per_value=2):
    for name, v in (("batch", batch), ("seq_len", seq_len), ("hidden", hidden), ("tp", tp),
                    ("bytes_per_value", bytes_per_value)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    S = batch * seq_len * hidden * bytes_per_value
    share = (tp - 1) / tp
    if sequence_parallel:
        return 4 * share * S + 4 * share * S       # all-gathers + reduce-scatters
    return 4 * 2 * share * S                       # all-reduces
