# loses: dp_crossover_tests
# why: no clamp: a negative T* when the overhead alone exceeds comm
def dp_crossover_from(tokens, compute_s, comm_s):
    T, c, m = (np.asarray(a, dtype=float) for a in (tokens, compute_s, comm_s))
    if T.ndim != 1 or T.size < 2 or c.shape != T.shape or m.shape != T.shape:
        raise ValueError("tokens, compute_s and comm_s must be 1-D sequences of the same length >= 2")
    if np.unique(T).size < 2:
        raise ValueError("need at least 2 distinct token counts")
    for name, a in (("tokens", T), ("compute_s", c), ("comm_s", m)):
        if not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ValueError(f"{name} must be finite and > 0")
    c1, c0 = np.polyfit(T, c, 1)
    if c1 <= 0:
        raise ValueError(f"compute does not grow with the tokens (slope {c1:.3g} s/token)")
    comm = float(np.median(m))
    return {"overhead_s": float(c0), "per_token_s": float(c1), "comm_s": comm,
            "crossover_tokens": (comm - c0) / c1}


dp_fit = dp_crossover_from(**dp_measured)
print({k: f"{v:.4g}" for k, v in dp_fit.items()})
