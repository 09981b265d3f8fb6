# loses: flops_per_token_tests
# why: attention term 4LHQT (forward only) with the 6N of training
def model_flops_per_token(n_params, layers, heads, head_dim, seq_len):
    '''Training FLOPs per token (PaLM, appendix B): 6 N + 12 L H Q T.'''
    for name, value in [("n_params", n_params), ("layers", layers), ("heads", heads), ("head_dim", head_dim),
                        ("seq_len", seq_len)]:
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    return 6.0 * n_params + 4.0 * layers * heads * head_dim * seq_len


n_matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
tokens = torch.randint(0, CFG["vocab"], (BATCH, CFG["seq_len"] + 1))
with FlopCounterMode(display=False) as counter:
    logits = model(tokens[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, CFG["vocab"]), tokens[:, 1:].reshape(-1))
    loss.backward()
model.zero_grad(set_to_none=True)
counted_per_token = counter.get_total_flops() / (BATCH * CFG["seq_len"])
flops_per_token = model_flops_per_token(n_matmul, CFG["layers"], CFG["heads"], CFG["d_model"] // CFG["heads"],
                                        CFG["seq_len"])
print(f"matmul parameters N = {n_matmul:,}")
print(f"FLOPs per token: formula {flops_per_token:,.0f}, FlopCounterMode {counted_per_token:,.0f}")
