# loses: clip_scale_tests
# why: the shortcut: torch.nn.utils.clip_grad_norm_ on tensor copies, the scale read back
def clip_scale(grads, max_norm):
    """Global 2-norm of a list of arrays and torch's clipping coefficient. Returns (total_norm, scale)."""
    import torch
    ps = [torch.zeros(np.shape(x), dtype=torch.float64, requires_grad=True) for x in grads]
    for p, x in zip(ps, grads):
        p.grad = torch.tensor(np.asarray(x, dtype=float))
    total = float(torch.nn.utils.clip_grad_norm_(ps, max_norm))
    return total, min(1.0, max_norm / (total + 1e-6))
