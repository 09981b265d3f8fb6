# loses: effective_batch_tests
# why: gradient accumulation left out of the batch
def effective_batch(micro_batch, seq_len, dp, grad_accum):
    """(sequences, tokens) that one optimizer step averages over."""
    for name, value in [("micro_batch", micro_batch), ("seq_len", seq_len), ("dp", dp), ("grad_accum", grad_accum)]:
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    sequences = int(micro_batch * dp)
    return sequences, sequences * int(seq_len)
