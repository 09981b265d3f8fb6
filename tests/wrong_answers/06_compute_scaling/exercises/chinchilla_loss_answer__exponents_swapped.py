# loses: chinchilla_loss_tests
# why: alpha on D and beta on N
def chinchilla_loss(n_params, n_tokens, fit="hoffmann"):
    '''L(N, D) = E + A / N^alpha + B / D^beta in nats/token, with the constants of FIT_PARAMS[fit].'''
    if fit not in FIT_PARAMS:
        raise ValueError(f"unknown fit {fit!r}; choose one of {sorted(FIT_PARAMS)}")
    p = FIT_PARAMS[fit]
    n = np.asarray(n_params, dtype=float)
    d = np.asarray(n_tokens, dtype=float)
    if np.any(~(n > 0)) or np.any(~(d > 0)):
        raise ValueError("n_params and n_tokens must be > 0")
    loss = p["E"] + p["A"] / n ** p["beta"] + p["B"] / d ** p["alpha"]
    return float(loss) if np.ndim(loss) == 0 else loss
