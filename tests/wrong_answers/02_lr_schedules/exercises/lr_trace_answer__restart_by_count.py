# loses: lr_trace_tests
# why: compares only the number of jumps, not where they are
def diagnose_lr_trace(logged, intended, grad_accum):
    """Name the bug behind a learning-rate log: "ok", "not_scaled", "per_microbatch", "no_warmup",
    "wrong_restart" or "unknown"."""
    logged = np.asarray(logged, dtype=float)
    intended = np.asarray(intended, dtype=float)
    if logged.shape != intended.shape:
        raise ValueError(f"traces differ in length: {logged.shape} vs {intended.shape}")
    peak = intended.max()

    def same(a, b):
        return np.allclose(a, b, rtol=1e-4, atol=1e-9 * peak)

    if same(logged, intended):
        return "ok"
    nonzero = intended > 1e-3 * peak
    ratio = logged[nonzero] / intended[nonzero]
    if np.allclose(ratio, ratio[0], rtol=1e-3) and abs(ratio[0] - 1) > 1e-3:
        return "not_scaled"
    if grad_accum > 1:
        t = np.arange((len(logged) - 1) // grad_accum + 1)
        if same(logged[t], intended[grad_accum * t]):
            return "per_microbatch"
    if intended[0] < 0.5 * peak and logged[0] > 0.9 * peak:
        return "no_warmup"

    def jumps(trace):
        return list(np.flatnonzero(np.diff(trace) > 0.5 * peak) + 1)

    if len(jumps(logged)) != len(jumps(intended)):
        return "wrong_restart"
    return "unknown"


for bug, tr in examples.items():
    print(f"{bug:>15}: diagnosed {diagnose_lr_trace(tr['logged'], tr['intended'], tr['grad_accum'])}")
