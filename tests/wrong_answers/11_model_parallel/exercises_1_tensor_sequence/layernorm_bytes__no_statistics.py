# loses: layernorm_bytes_tests
# why: the mean and 1/sigma per token left out
def layernorm_activation_bytes(batch, seq_len, hidden, tp, sequence_parallel=False, bytes_per_value=4):
    for name, v in (("batch", batch), ("seq_len", seq_len), ("hidden", hidden), ("tp", tp),
                    ("bytes_per_value", bytes_per_value)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if sequence_parallel and seq_len % tp:
        raise ValueError(f"tp={tp} must divide seq_len={seq_len} for sequence parallelism")
    tokens = seq_len // tp if sequence_parallel else seq_len
    return 2 * batch * tokens * hidden * bytes_per_value
