# loses: tokens_seen_tests_validation
# why: accepts a utilization above 1
def tokens_seen(steps, global_batch, seq_len, utilization=1.0):
    if steps <= 0 or global_batch <= 0 or seq_len <= 0:
        raise ValueError("steps, global_batch and seq_len must be > 0")
    return float(steps) * global_batch * seq_len * utilization


def epochs_over(doc_lengths, tokens):
    doc_lengths = list(doc_lengths)
    if not doc_lengths or any(n < 0 for n in doc_lengths) or sum(doc_lengths) == 0:
        raise ValueError("the corpus must hold tokens and no length may be negative")
    return tokens / sum(doc_lengths)
