# loses: clip_and_trace_tests
# why: scales by max_norm / norm without min(1, .): small gradients are blown up
def clip_and_trace(model, batches, max_norm, lr):
    if max_norm <= 0:
        raise ValueError("max_norm must be > 0")
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    out = []
    for x, y in batches:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        pre = torch.sqrt(sum((g ** 2).sum() for g in grads))
        coef = float(max_norm / (pre + 1e-6))
        for g in grads:
            g.mul_(coef)
        post = torch.sqrt(sum((g ** 2).sum() for g in grads))
        opt.step()
        out.append((float(pre), float(post)))
    return out
