# loses: tokens_to_reach_tests, tokens_to_reach_tests_validation
# why: forgets E: solves A/N^alpha + B/D^beta = target
def tokens_to_reach(n_params, target_loss):
    '''Tokens D with L(N, D) = target_loss for the Hoffmann fit: (B / (target - E - A N^-alpha))^(1/beta).'''
    E, A, B, alpha, beta = 1.69, 406.4, 410.7, 0.34, 0.28
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params}")
    gap = target_loss - A * n_params ** -alpha
    if gap <= 0:
        raise ValueError(f"a model of {n_params:.3g} parameters cannot reach loss {target_loss}: "
                         f"its loss never falls below {target_loss - gap:.4f}")
    return (B / gap) ** (1.0 / beta)
