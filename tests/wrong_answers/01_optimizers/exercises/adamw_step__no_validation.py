# loses: adamw_step_validation_tests
# why: no argument checks: step=0 divides by zero, mismatched shapes broadcast
def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """One AdamW update (torch.optim.AdamW semantics). Returns (param, m, v)."""
    beta1, beta2 = betas
    if lr < 0:
        raise ValueError(f"lr must be >= 0, got {lr}")
    if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
        raise ValueError(f"betas must lie in [0, 1), got {betas}")
    if eps < 0 or weight_decay < 0:
        raise ValueError("eps and weight_decay must be >= 0")
    scalar = all(np.ndim(x) == 0 for x in (param, grad, m, v))
    p, g, m, v = (np.asarray(x, dtype=float) for x in (param, grad, m, v))
    p = p * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1**step)
    v_hat = v / (1 - beta2**step)
    p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    if scalar:
        return float(p), float(m), float(v)
    return p, m, v
