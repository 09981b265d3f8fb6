# loses: inference_tests
# why: a 25-point grid over log N and no refinement: N off by up to 25%
def tokens_for_loss(n_params, target_loss, fit="hoffmann"):
    '''Training tokens that bring a model of n_params parameters to target_loss.'''
    if fit not in FIT_PARAMS:
        raise ValueError(f"unknown fit {fit!r}")
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params}")
    p = FIT_PARAMS[fit]
    gap = target_loss - p["E"] - p["A"] * n_params ** -p["alpha"]
    if gap <= 0:
        raise ValueError(f"{n_params:.3g} parameters cannot reach loss {target_loss}")
    return (p["B"] / gap) ** (1.0 / p["beta"])


def inference_aware_optimum(target_loss, inference_tokens, fit="hoffmann"):
    '''(N, D_train) reaching target_loss with the least 6 N D_train + 2 N inference_tokens.'''
    if fit not in FIT_PARAMS:
        raise ValueError(f"unknown fit {fit!r}")
    p = FIT_PARAMS[fit]
    if not target_loss > p["E"]:
        raise ValueError(f"target_loss {target_loss} is not above the irreducible loss {p['E']}")
    if not inference_tokens >= 0:
        raise ValueError(f"inference_tokens must be >= 0, got {inference_tokens}")
    log_floor = math.log((p["A"] / (target_loss - p["E"])) ** (1.0 / p["alpha"]))

    def total(log_n):
        n = math.exp(log_n)
        return 6.0 * n * tokens_for_loss(n, target_loss, fit) + 2.0 * n * inference_tokens

    grid = np.linspace(log_floor + 1e-6, log_floor + 12.0, 25)
    i = int(np.argmin([total(x) for x in grid]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    r = (math.sqrt(5) - 1) / 2
    for _ in range(0):
        a, b = hi - r * (hi - lo), lo + r * (hi - lo)
        if total(a) < total(b):
            hi = b
        else:
            lo = a
    n = math.exp(0.5 * (lo + hi))
    return n, tokens_for_loss(n, target_loss, fit)
