# loses: attention_share_tests
# why: attention counted forward only (4 L d T) against 6N
def attention_flops_share(n_params, layers, d_model, seq_len):
    '''Attention's share of training FLOPs per token: 12 L d T / (6 N + 12 L d T).'''
    for name, value in [("n_params", n_params), ("layers", layers), ("d_model", d_model), ("seq_len", seq_len)]:
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    attention = 4.0 * layers * d_model * seq_len
    return attention / (6.0 * n_params + attention)
