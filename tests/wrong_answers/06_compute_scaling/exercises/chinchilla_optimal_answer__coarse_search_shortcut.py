# loses: chinchilla_optimal_tests
# why: skips the derivation: a coarse grid search (100 sizes per decade) instead of the closed form
alpha, beta = 0.34, 0.28
exponent_a = beta / (alpha + beta)
exponent_b = alpha / (alpha + beta)


def chinchilla_optimal(compute_flops, fit="hoffmann"):
    '''(N_opt, D_opt) minimising chinchilla_loss subject to 6 N D = compute_flops, in closed form.'''
    # dL/dN = 0 along D = C/(6N) gives alpha A N^-alpha = beta B D^-beta; with D = (C/6)/N:
    # N^(alpha+beta) = (alpha A / (beta B)) (C/6)^beta.
    if fit not in FIT_PARAMS:
        raise ValueError(f"unknown fit {fit!r}; choose one of {sorted(FIT_PARAMS)}")
    if not compute_flops > 0:
        raise ValueError(f"compute_flops must be > 0, got {compute_flops}")
    p = FIT_PARAMS[fit]
    grid = np.logspace(5, 15, 1001)
    loss = p["E"] + p["A"] * grid ** -p["alpha"] + p["B"] * (compute_flops / (6.0 * grid)) ** -p["beta"]
    n_opt = float(grid[int(np.argmin(loss))])
    d_opt = compute_flops / (6.0 * n_opt)
    return n_opt, d_opt


print(f"a = {exponent_a:.4f}, b = {exponent_b:.4f}")
for c in (1e21, 5.76e23, 1e25):
    n_opt, d_opt = chinchilla_optimal(c)
    print(f"C = {c:.2e} FLOPs: N_opt = {n_opt:.3e}, D_opt = {d_opt:.3e}, {d_opt / n_opt:.0f} tokens per parameter")
