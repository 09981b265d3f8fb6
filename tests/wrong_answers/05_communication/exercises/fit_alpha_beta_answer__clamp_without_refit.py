# loses: fit_alpha_beta_tests
# why: sets a negative alpha to 0 but keeps the slope of the free fit
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
    A = np.stack([np.ones_like(S_), S_], axis=1) / t[:, None]
    (alpha, b), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    if alpha < 0:
        alpha = 0.0
    if b <= 0:
        raise ValueError(f"times do not grow with size (b = {b})")
    return float(alpha), float(1 / b)


print("fit on exact synthetic data (3e-4 s, 1.2e9 B/s):", fit_alpha_beta(S, 3e-4 + S / 1.2e9))
