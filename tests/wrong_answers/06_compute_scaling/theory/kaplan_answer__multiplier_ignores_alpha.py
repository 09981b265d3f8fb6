# loses: kaplan_tests
# why: compute_multiplier hard-codes Kaplan's 0.050 and ignores its alpha argument
def kaplan_loss_compute(compute_flops):
    '''Kaplan et al. 2020: L(C) = (C_c / C)^0.050 with C_c = 3.1e8 PF-days, C in FLOPs.'''
    if not compute_flops > 0:
        raise ValueError(f"compute_flops must be > 0, got {compute_flops}")
    pf_days = compute_flops / (1e15 * 86400)
    return (3.1e8 / pf_days) ** 0.050


def compute_multiplier(loss_ratio, alpha=0.050):
    '''Factor by which compute must grow to multiply the loss by loss_ratio when L ~ C^-alpha.'''
    if not loss_ratio > 0:
        raise ValueError(f"loss_ratio must be > 0, got {loss_ratio}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    return loss_ratio ** (-1.0 / 0.050)
