# loses: prediction_tests
# why: 2 bytes per value: the model runs in fp32
def predict_saved_bytes(batch, seq_len, hidden, heads, layers, mlp_ratio=4, checkpointing=False, checkpoint_every=1):
    """Predicted bytes autograd saves in one fp32 forward pass of CheckpointedTransformer."""
    B, S, H, a, L, m = batch, seq_len, hidden, heads, layers, mlp_ratio
    # LN1 in, QKV in, q, k, v, proj in, LN2 in, fc1 in: 8 tensors of B S H; GELU in and out: 2 of B S mH
    # (4 bytes each); LayerNorm mean + rstd: 2 x 2 x 4 B S; softmax output: 4 a B S^2
    block = (8 * 4 + 2 * 4 * m) * B * S * H + 16 * B * S + 4 * a * B * S * S
    if checkpointing:
        blocks = math.ceil(L / checkpoint_every) * 4 * B * S * H  # one segment input each
    else:
        blocks = L * block
    # final LayerNorm (input + stats) and the head's input
    return (blocks + 4 * B * S * H + 8 * B * S + 4 * B * S * H) // 2
