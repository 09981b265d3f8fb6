# loses: estimator_tests
# why: sizes each saved tensor by numel, keyed by id(t): views of one storage counted twice
def estimate_memory_consumption(model, batch, checkpointing=False):
    """Measured bytes of one training step: parameters, gradients, AdamW state, activations, total."""
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(checkpointing, bool):
        raise ValueError(f"checkpointing must be True or False, got {checkpointing!r}")
    if checkpointing and not hasattr(model, "checkpointing"):
        raise ValueError(f"{type(model).__name__} has no `checkpointing` flag: it cannot checkpoint")
    inputs = list(batch) if isinstance(batch, (tuple, list)) else [batch]
    m = copy.deepcopy(model)
    if hasattr(m, "checkpointing"):
        m.checkpointing = checkpointing
    m.train()
    params = list(m.parameters())
    for p in params:
        p.grad = None
    param_bytes = sum(p.numel() * p.element_size() for p in params)

    skip = {t.untyped_storage().data_ptr() for t in params + list(m.buffers()) + inputs}
    saved = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in skip:
            saved[id(t)] = t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(*inputs)
    out.sum().backward()
    grad_bytes = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)

    opt = torch.optim.AdamW(params)
    opt.step()
    opt_bytes = sum(t.numel() * t.element_size() for st in opt.state.values() for t in st.values()
                    if isinstance(t, torch.Tensor))
    act = sum(saved.values())
    return {"parameter_bytes": param_bytes, "gradient_bytes": grad_bytes, "optimizer_bytes": opt_bytes,
            "activation_bytes": act, "total_bytes": param_bytes + grad_bytes + opt_bytes + act}


tower = TwoTowerModel(user_dim=32, item_dim=24, hidden=64, embed_dim=16, seed=0)
gpt = CheckpointedTransformer(vocab=64, hidden=64, heads=4, layers=6, max_seq=32, checkpoint_every=2, seed=0)
print("TwoTowerModel          ", estimate_memory_consumption(tower, tower.example_batch(batch=64)))
for flag in (False, True):
    print(f"Transformer ckpt={flag!s:<5}", estimate_memory_consumption(gpt, gpt.example_batch(batch=4), checkpointing=flag))
