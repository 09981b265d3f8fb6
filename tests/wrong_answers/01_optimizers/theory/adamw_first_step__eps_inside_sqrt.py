# loses: adamw_first_step_tests
# why: eps inside the square root
def adamw_first_step(theta, grad, lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.999, eps=1e-8):
    """First AdamW update from zero moments. Returns (m_hat, v_hat, theta_next)."""
    m = (1 - beta1) * grad
    v = (1 - beta2) * grad**2
    m_hat = m / (1 - beta1)
    v_hat = v / (1 - beta2)
    theta_next = theta * (1 - lr * weight_decay) - lr * m_hat / (math.sqrt(v_hat + eps))
    return m_hat, v_hat, theta_next
