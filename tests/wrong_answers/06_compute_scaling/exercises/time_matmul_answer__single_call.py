# loses: time_matmul_tests
# why: times one call per trial, ignoring min_time: below the clock's resolution for small matrices
def time_matmul(m, n, k, min_time=0.01, trials=3):
    '''Best-of-trials seconds per call of torch.mm on fp32 A (m x k) @ B (k x n).'''
    for name, value in [("m", m), ("n", n), ("k", k), ("min_time", min_time), ("trials", trials)]:
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    a = torch.randn(m, k)
    b = torch.randn(k, n)
    torch.mm(a, b)
    best = float("inf")
    repeats = 1
    for _ in range(trials):
        start = time.perf_counter()
        torch.mm(a, b)
        elapsed = time.perf_counter() - start
        best = min(best, elapsed / repeats)
    return best
