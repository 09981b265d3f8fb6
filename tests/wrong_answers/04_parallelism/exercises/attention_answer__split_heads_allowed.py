# loses: attention_tests_validation
# why: no check that tp divides heads: a head is cut across ranks
def attention_tp_shards(hidden, heads, tp):
    """(heads per rank, per-rank W_QKV shape, per-rank W_O shape) for Megatron-style TP."""
    if hidden < 1 or heads < 1 or tp < 1:
        raise ValueError(f"hidden, heads and tp must be >= 1, got {hidden}, {heads}, {tp}")
    if hidden % heads:
        raise ValueError(f"heads={heads} must divide hidden={hidden}")
    return heads // tp, (hidden, 3 * hidden // tp), (hidden // tp, hidden)


heads_per_gpu = attention_tp_shards(4096, 32, 4)[0]
attn_forward_allreduces = 1
attn_backward_allreduces = 1
print(attention_tp_shards(4096, 32, 4))
