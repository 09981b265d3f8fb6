# loses: adamw_first_step_tests
# why: the shortcut: one step of the course library's adamw_step
def adamw_first_step(theta, grad, lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.999, eps=1e-8):
    """First AdamW update from zero moments. Returns (m_hat, v_hat, theta_next)."""
    from solutions_lib.optim import adamw_step
    theta_next, m, v = adamw_step(theta, grad, 0.0, 0.0, 1, lr, (beta1, beta2), eps, weight_decay)
    m_hat, v_hat = m / (1 - beta1), v / (1 - beta2)
    return m_hat, v_hat, theta_next
