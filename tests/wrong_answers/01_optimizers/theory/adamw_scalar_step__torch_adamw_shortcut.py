# loses: adamw_scalar_step_tests
# why: the shortcut: one torch.optim.AdamW step on a one-element tensor with the moments patched in
def adamw_scalar_step(theta, grad, m, v, t, lr=1e-3, weight_decay=0.01, beta1=0.9, beta2=0.999, eps=1e-8):
    """One AdamW update of a scalar at step t (1-based). Returns (theta, m, v)."""
    import torch
    p = torch.tensor([theta], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.AdamW([p], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay)
    opt.state[p] = {'step': torch.tensor(float(t - 1)), 'exp_avg': torch.tensor([m], dtype=torch.float64),
                    'exp_avg_sq': torch.tensor([v], dtype=torch.float64)}
    p.grad = torch.tensor([grad], dtype=torch.float64)
    opt.step()
    st = opt.state[p]
    return p.item(), st['exp_avg'].item(), st['exp_avg_sq'].item()
