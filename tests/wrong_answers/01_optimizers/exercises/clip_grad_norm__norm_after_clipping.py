# loses: clip_grad_norm_seed_tests, clip_grad_norm_tests
# why: returns the norm after clipping instead of the norm before
def clip_grad_norm(grads, max_norm, norm_type=2.0):
    """Global-norm clipping (torch.nn.utils.clip_grad_norm_ semantics). Returns (clipped, total_norm)."""
    single = isinstance(grads, np.ndarray)
    arrays = [np.asarray(g, dtype=float) for g in ([grads] if single else grads)]
    if math.isinf(norm_type):
        total = max((float(np.max(np.abs(a))) for a in arrays if a.size), default=0.0)
    else:
        total = sum(float(np.sum(np.abs(a) ** norm_type)) for a in arrays) ** (1.0 / norm_type)
    coef = min(1.0, max_norm / (total + 1e-6))
    clipped = [a * coef for a in arrays]
    return (clipped[0] if single else clipped), total * coef
