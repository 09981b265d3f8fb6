# loses: tp_crossover_tests
# why: a free quadratic fit instead of a h^2 through the origin
def tp_crossover_from(widths, compute_s, comm_s):
    h, c, m = (np.asarray(a, dtype=float) for a in (widths, compute_s, comm_s))
    if h.ndim != 1 or h.size < 2 or c.shape != h.shape or m.shape != h.shape:
        raise ValueError("widths, compute_s and comm_s must be 1-D sequences of the same length >= 2")
    if np.unique(h).size < 2:
        raise ValueError("need at least 2 distinct widths")
    for name, arr in (("widths", h), ("compute_s", c), ("comm_s", m)):
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ValueError(f"{name} must be finite and > 0")
    a = float(np.polyfit(h, c, 2)[0])
    b1, b0 = np.polyfit(h, m, 1)
    disc = b1 * b1 + 4 * a * b0
    root = 0.0 if disc < 0 else max(0.0, (b1 + math.sqrt(disc)) / (2 * a))
    return {"compute_per_h2_s": a, "comm_intercept_s": float(b0), "comm_per_width_s": float(b1),
            "crossover_width": root}


tp_fit = tp_crossover_from(**tp_measured)
print({k: f"{v:.4g}" for k, v in tp_fit.items()})
