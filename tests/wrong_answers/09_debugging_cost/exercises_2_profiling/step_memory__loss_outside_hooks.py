# loses: step_memory_activation_tests
# why: the loss runs outside saved_tensors_hooks: its log-softmax is not counted
def step_memory(model, opt, x, y):
    params = list(model.parameters())
    skip = {t.untyped_storage().data_ptr() for t in [*params, x, y]}
    saved = {}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in skip:
            saved[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(x)
    if True:
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    del logits
    loss.backward()
    gradients = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
    opt.step()
    state = [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return {"parameters": int(sum(p.numel() * p.element_size() for p in params)),
            "gradients": int(gradients),
            "optimizer": int(sum(t.numel() * t.element_size() for t in state)),
            "activations": int(sum(saved.values()))}
