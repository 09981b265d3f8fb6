# loses: robust_fit_tests
# why: always Huber: robust=False still fits the robust loss, so the least-squares fit is not one
def fit_loss_law(n_params, n_tokens, loss, robust=True, delta=1e-3):
    """Approach 3: L = E + A N^-alpha + B D^-beta minimising the Huber (or squared) log-loss residuals."""
    n, d, y = (np.asarray(v, dtype=float) for v in (n_params, n_tokens, loss))
    if not (n.shape == d.shape == y.shape) or n.ndim != 1:
        raise ValueError("n_params, n_tokens and loss must be 1-D arrays of one length")
    if n.size < 6:
        raise ValueError(f"need at least 6 runs, got {n.size}")
    if not np.all(np.isfinite(np.concatenate([n, d, y]))) or np.any(np.concatenate([n, d, y]) <= 0):
        raise ValueError("every value must be finite and > 0")
    if not delta > 0:
        raise ValueError(f"delta must be > 0, got {delta}")
    ln, ld, ly = np.log(n), np.log(d), np.log(y)

    def rho(r):
        return r * r if False else np.where(np.abs(r) <= delta, r * r / 2, delta * (np.abs(r) - delta / 2))

    def model(th):
        # ln L = logsumexp(a - alpha ln N, b - beta ln D, e) and its derivatives in (e, a, b, alpha, beta)
        e, a, b, al, be = th
        z = np.stack([a - al * ln, b - be * ld, np.full_like(ln, e)])
        s = np.exp(z - z.max(0))
        p = s / s.sum(0)
        return z.max(0) + np.log(s.sum(0)), np.stack([p[2], p[0], p[1], -p[0] * ln, -p[1] * ld], 1)

    # starts: for every exponent pair of a 0.05 grid, E, A, B by least squares on relative residuals (C.6's trick)
    n0, d0 = np.exp(ln.mean()), np.exp(ld.mean())
    g = np.arange(0.05, 1.0001, 0.05)
    aa, bb = (v.ravel() for v in np.meshgrid(g, g, indexing="ij"))
    X = np.stack([np.ones((aa.size, n.size)), (n / n0)[None] ** -aa[:, None], (d / d0)[None] ** -bb[:, None]], axis=2)
    Xw = X / y[None, :, None]
    coef = np.linalg.solve(Xw.transpose(0, 2, 1) @ Xw, (Xw.transpose(0, 2, 1) @ np.ones(n.size))[..., None])[..., 0]
    coef = np.maximum(coef, 1e-6)
    score = rho(np.log(np.einsum("gni,gi->gn", X, coef)) - ly).sum(1)
    starts = np.stack([np.log(coef[:, 0]), np.log(coef[:, 1] * n0 ** aa), np.log(coef[:, 2] * d0 ** bb), aa, bb], 1)

    best = (np.inf, None)
    for th in starts[np.argsort(score)[:10]]:
        # iteratively reweighted least squares: Huber weights min(1, delta/|r|), damped Gauss-Newton steps
        pred, J = model(th)
        f, lam = rho(pred - ly).sum(), 1e-3
        for _ in range(300):
            r = pred - ly
            w = np.ones_like(r) if False else np.minimum(1.0, delta / np.maximum(np.abs(r), 1e-300))
            H = J.T @ (w[:, None] * J)
            step = np.linalg.solve(H + lam * np.diag(np.diag(H)), -J.T @ (w * r))
            pred2, J2 = model(th + step)
            f2 = rho(pred2 - ly).sum()
            if f2 <= f:
                small = f - f2 <= 1e-15 * f
                th, pred, J, f, lam = th + step, pred2, J2, f2, max(lam / 3, 1e-9)
                if small and lam <= 1e-6:
                    break
            else:
                lam *= 10
                if lam > 1e8:
                    break
        if f < best[0]:
            best = (f, th)
    e, a, b, al, be = best[1]
    return {"E": float(np.exp(e)), "A": float(np.exp(a)), "B": float(np.exp(b)), "alpha": float(al), "beta": float(be)}


fit_robust = fit_loss_law(dirty["n_params"], dirty["n_tokens"], dirty["loss"])
fit_lsq = fit_loss_law(dirty["n_params"], dirty["n_tokens"], dirty["loss"], robust=False)
t = dirty["true"]
for name, f in [("Huber", fit_robust), ("least squares", fit_lsq)]:
    print(f"{name:>13}: alpha = {f['alpha']:.3f}, beta = {f['beta']:.3f}, E = {f['E']:.3f}, a = {f['beta'] / (f['alpha'] + f['beta']):.3f}")
print(f"{'true':>13}: alpha = {t.alpha:.3f}, beta = {t.beta:.3f}, E = {t.E:.3f}, a = {t.beta / (t.alpha + t.beta):.3f}")
