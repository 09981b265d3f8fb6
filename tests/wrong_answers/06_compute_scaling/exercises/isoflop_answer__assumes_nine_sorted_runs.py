# loses: isoflop_tests, isoflop_tests_validation
# why: assumes the runs come budget by budget, 9 sizes each (a reshape), where the spec allows any order and count
def isoflop_fit(compute, n_params, loss):
    """Approach 2: the loss-minimising N of every IsoFLOP profile, and N_opt ~ C^a, D_opt ~ C^b."""
    c, n, y = (np.asarray(v, dtype=float) for v in (compute, n_params, loss))
    if not (c.shape == n.shape == y.shape) or c.ndim != 1:
        raise ValueError("compute, n_params and loss must be 1-D arrays of one length")
    if c.size == 0 or not np.all(np.isfinite(np.concatenate([c, n, y]))) or np.any(np.concatenate([c, n, y]) <= 0):
        raise ValueError("every value must be finite and > 0")
    budgets = c.reshape(-1, 9)[:, 0]
    if budgets.size < 2:
        raise ValueError("need runs at two or more budgets")
    n_opt = []
    for b in budgets:
        k = list(budgets).index(b)
        x, l = np.log(n.reshape(-1, 9)[k]), y.reshape(-1, 9)[k]
        if np.unique(x).size < 3:
            raise ValueError(f"budget {b:.3g} has fewer than 3 distinct sizes")
        p2, p1, _ = np.polyfit(x - x.mean(), l, 2)
        n_opt.append(np.exp(x.mean() - p1 / (2 * p2)))
    n_opt = np.array(n_opt)
    d_opt = budgets / (6 * n_opt)
    a = float(np.polyfit(np.log(budgets), np.log(n_opt), 1)[0])
    b = float(np.polyfit(np.log(budgets), np.log(d_opt), 1)[0])
    return {"compute": budgets, "n_opt": n_opt, "d_opt": d_opt, "a": a, "b": b}


iso = isoflop_fit(profiles["compute"], profiles["n_params"], profiles["loss"])
for c, n, t in zip(iso["compute"], iso["n_opt"], profiles["n_opt_true"]):
    print(f"C = {c:.0e}: N_opt = {n:.3e} (true minimum of the law {t:.3e})")
print(f"a = {iso['a']:.3f}, b = {iso['b']:.3f} (true {profiles['a_true']:.3f}, {profiles['b_true']:.3f})")
