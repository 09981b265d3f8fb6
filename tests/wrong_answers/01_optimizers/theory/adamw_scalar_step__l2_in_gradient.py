# loses: adamw_scalar_step_tests
# why: Adam with L2 regularisation instead of decoupled decay
def adamw_scalar_step(theta, grad, m, v, t, lr=1e-3, weight_decay=0.01, beta1=0.9, beta2=0.999, eps=1e-8):
    """One AdamW update of a scalar at step t (1-based). Returns (theta, m, v)."""
    grad = grad + weight_decay * theta
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    theta = theta - lr * m_hat / (math.sqrt(v_hat) + eps)
    return theta, m, v
