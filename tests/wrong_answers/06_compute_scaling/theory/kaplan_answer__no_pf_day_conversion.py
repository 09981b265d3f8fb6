# loses: kaplan_tests
# why: uses C in FLOPs directly in (C_c / C): no PF-day conversion
def kaplan_loss_compute(compute_flops):
    '''Kaplan et al. 2020: L(C) = (C_c / C)^0.050 with C_c = 3.1e8 PF-days, C in FLOPs.'''
    if not compute_flops > 0:
        raise ValueError(f"compute_flops must be > 0, got {compute_flops}")
    pf_days = compute_flops
    return (3.1e8 / pf_days) ** 0.050


def compute_multiplier(loss_ratio, alpha=0.050):
    '''Factor by which compute must grow to multiply the loss by loss_ratio when L ~ C^-alpha.'''
    if not loss_ratio > 0:
        raise ValueError(f"loss_ratio must be > 0, got {loss_ratio}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    return loss_ratio ** (-1.0 / alpha)
