# loses: fit_alpha_beta_tests
# why: rows divided by T^2: the relative residual divides by T once
def fit_alpha_beta(sizes_bytes, seconds):
    """Minimise sum(((alpha + S b - t) / t)^2); returns (alpha, 1 / b), alpha >= 0."""
    S_ = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if S_.shape != t.shape:
        raise ValueError(f"sizes and times differ in length: {S_.size} and {t.size}")
    if np.any(S_ < 0) or np.any(t <= 0):
        raise ValueError("sizes must be >= 0 and times > 0")
    if np.unique(S_).size < 2:
        raise ValueError("need at least two different sizes")
    A = np.stack([np.ones_like(S_), S_], axis=1) / t[:, None] ** 2
    (alpha, b), *_ = np.linalg.lstsq(A, 1 / t, rcond=None)
    if alpha < 0:
        x = S_ / t
        alpha, b = 0.0, x.sum() / (x @ x)
    if b <= 0:
        raise ValueError(f"times do not grow with size (b = {b})")
    return float(alpha), float(1 / b)


print("fit on exact synthetic data (3e-4 s, 1.2e9 B/s):", fit_alpha_beta(S, 3e-4 + S / 1.2e9))
