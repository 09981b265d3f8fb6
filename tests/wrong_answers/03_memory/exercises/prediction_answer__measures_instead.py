# loses: prediction_tests
# why: the shortcut: builds the model and measures its saved bytes instead of predicting them
def predict_saved_bytes(batch, seq_len, hidden, heads, layers, mlp_ratio=4, checkpointing=False, checkpoint_every=1):
    """Predicted bytes autograd saves in one fp32 forward pass of CheckpointedTransformer."""
    from solutions_lib.memory import saved_activation_bytes
    from solutions_lib.models import CheckpointedTransformer
    model = CheckpointedTransformer(vocab=40, hidden=hidden, heads=heads, layers=layers, max_seq=seq_len, mlp_ratio=mlp_ratio,
                                    checkpoint_every=checkpoint_every)
    model.checkpointing = checkpointing
    return saved_activation_bytes(model, model.example_batch(batch, seq_len))
    B, S, H, a, L, m = batch, seq_len, hidden, heads, layers, mlp_ratio
    # LN1 in, QKV in, q, k, v, proj in, LN2 in, fc1 in: 8 tensors of B S H; GELU in and out: 2 of B S mH
    # (4 bytes each); LayerNorm mean + rstd: 2 x 2 x 4 B S; softmax output: 4 a B S^2
    block = (8 * 4 + 2 * 4 * m) * B * S * H + 16 * B * S + 4 * a * B * S * S
    if checkpointing:
        blocks = math.ceil(L / checkpoint_every) * 4 * B * S * H  # one segment input each
    else:
        blocks = L * block
    # final LayerNorm (input + stats) and the head's input
    return blocks + 4 * B * S * H + 8 * B * S + 4 * B * S * H
