# loses: clip_grad_norm_tests
# why: norm_type=inf treated as the 2-norm
def clip_grad_norm(grads, max_norm, norm_type=2.0):
    """Global-norm clipping (torch.nn.utils.clip_grad_norm_ semantics). Returns (clipped, total_norm)."""
    single = isinstance(grads, np.ndarray)
    arrays = [np.asarray(g, dtype=float) for g in ([grads] if single else grads)]
    total = math.sqrt(sum(float(np.sum(a * a)) for a in arrays))
    coef = min(1.0, max_norm / (total + 1e-6))
    clipped = [a * coef for a in arrays]
    return (clipped[0] if single else clipped), total
