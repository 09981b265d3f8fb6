# loses: adamw_step_seed_tests, adamw_step_array_tests
# why: the shortcut: one torch.optim.AdamW step on a tensor copy instead of the arithmetic
def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """One AdamW update (torch.optim.AdamW semantics). Returns (param, m, v)."""
    beta1, beta2 = betas
    if isinstance(step, bool) or int(step) != step or step < 1:
        raise ValueError(f"step must be an integer >= 1, got {step!r}")
    if lr < 0:
        raise ValueError(f"lr must be >= 0, got {lr}")
    if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
        raise ValueError(f"betas must lie in [0, 1), got {betas}")
    if eps < 0 or weight_decay < 0:
        raise ValueError("eps and weight_decay must be >= 0")
    scalar = all(np.ndim(x) == 0 for x in (param, grad, m, v))
    p, g, m, v = (np.asarray(x, dtype=float) for x in (param, grad, m, v))
    if not (p.shape == g.shape == m.shape == v.shape):
        raise ValueError(f"shapes differ: {p.shape}, {g.shape}, {m.shape}, {v.shape}")
    t = torch.tensor(p, requires_grad=True)
    opt = torch.optim.AdamW([t], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    t.grad = torch.tensor(g)
    opt.step()  # first step, then patch the moments in
    st = opt.state[t]
    st['step'] = torch.tensor(float(step - 1))
    st['exp_avg'] = torch.tensor(m)
    st['exp_avg_sq'] = torch.tensor(v)
    with torch.no_grad():
        t.copy_(torch.tensor(p))
    opt.step()
    p, m, v = t.detach().numpy().copy(), st['exp_avg'].numpy().copy(), st['exp_avg_sq'].numpy().copy()
    if scalar:
        return float(p), float(m), float(v)
    return p, m, v
