# loses: effective_batch_tests
# why: tokens counted for one GPU (micro_batch * grad_accum * seq_len), dp left out
def effective_batch(micro_batch, seq_len, dp, grad_accum):
    """(sequences, tokens) that one optimizer step averages over."""
    for name, value in [("micro_batch", micro_batch), ("seq_len", seq_len), ("dp", dp), ("grad_accum", grad_accum)]:
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    sequences = int(micro_batch * dp * grad_accum)
    return sequences, int(micro_batch * grad_accum * seq_len)
