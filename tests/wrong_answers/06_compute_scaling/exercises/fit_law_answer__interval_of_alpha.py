# loses: fit_law_tests
# why: a_interval from the percentiles of alpha, not of a = beta / (alpha + beta)
def fit_scaling_law(n_params, n_tokens, loss):
    """Least-squares fit of L = E + A N^-alpha + B D^-beta: dict with E, A, B, alpha, beta."""
    n, d, y = (np.asarray(x, dtype=float) for x in (n_params, n_tokens, loss))
    if not (n.shape == d.shape == y.shape) or n.ndim != 1:
        raise ValueError("n_params, n_tokens and loss must be 1-D arrays of one length")
    if n.size < 6:
        raise ValueError(f"need at least 6 runs, got {n.size}")
    if np.any(n <= 0) or np.any(d <= 0) or np.any(y <= 0) or not np.all(np.isfinite(np.concatenate([n, d, y]))):
        raise ValueError("all values must be finite and > 0")
    n0, d0 = np.exp(np.mean(np.log(n))), np.exp(np.mean(np.log(d)))
    ns, ds = n / n0, d / d0

    def solve(a, b):
        """Least-squares (E, A, B) and the RSS for every exponent pair (a[g], b[g]) at once."""
        X = np.stack([np.ones((a.size, ns.size)), ns[None, :] ** -a[:, None], ds[None, :] ** -b[:, None]], axis=2)
        Xt = X.transpose(0, 2, 1)
        coef = np.linalg.solve(Xt @ X, (Xt @ y)[..., None])[..., 0]    # the normal equations, one 3 x 3 per pair
        rss = np.sum(((X @ coef[..., None])[..., 0] - y) ** 2, axis=1)
        return rss, coef

    step, grid_a = 0.01, np.arange(0.05, 1.0 + 1e-9, 0.01)
    grid_b = grid_a
    for _ in range(3):                                 # steps 0.01, 0.001, 0.0001
        aa, bb = (g.ravel() for g in np.meshgrid(grid_a, grid_b, indexing="ij"))
        rss, coef = solve(aa, bb)
        i = int(np.argmin(rss))
        a, b, (E, As, Bs) = aa[i], bb[i], coef[i]
        step /= 10
        grid_a = np.clip(a + step * np.arange(-10, 11), 0.05, 1.0)
        grid_b = np.clip(b + step * np.arange(-10, 11), 0.05, 1.0)
    return {"E": float(E), "A": float(As * n0 ** a), "B": float(Bs * d0 ** b), "alpha": float(a), "beta": float(b)}


fit_runs = fit_scaling_law(runs["n_params"], runs["n_tokens"], runs["loss"])
boot = [fit_scaling_law(runs["n_params"][i], runs["n_tokens"][i], runs["loss"][i]) for i in BOOT_IDX]
alphas = np.array([f["alpha"] for f in boot])
betas = np.array([f["beta"] for f in boot])
alpha_std, beta_std = float(np.std(alphas)), float(np.std(betas))
a_interval = tuple(float(x) for x in np.percentile(alphas, [5, 95]))
t = runs["true"]
print(f"fit : E = {fit_runs['E']:.3f}, alpha = {fit_runs['alpha']:.3f} +- {alpha_std:.3f}, beta = {fit_runs['beta']:.3f} +- {beta_std:.3f}")
print(f"true: E = {t.E:.3f}, alpha = {t.alpha:.3f}, beta = {t.beta:.3f};  a in [{a_interval[0]:.3f}, {a_interval[1]:.3f}] "
      f"(true {t.beta / (t.alpha + t.beta):.3f}; Hoffmann 0.452, Epoch 0.513)")
