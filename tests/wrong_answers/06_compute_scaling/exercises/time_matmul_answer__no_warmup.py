# loses: time_matmul_tests
# why: no untimed first call: with one trial the first call's allocation and kernel selection is in the time
def time_matmul(m, n, k, min_time=0.01, trials=3):
    '''Best-of-trials seconds per call of torch.mm on fp32 A (m x k) @ B (k x n).'''
    for name, value in [("m", m), ("n", n), ("k", k), ("min_time", min_time), ("trials", trials)]:
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    a = torch.randn(m, k)
    b = torch.randn(k, n)
    best = float("inf")
    repeats = 1
    for _ in range(trials):
        while True:
            start = time.perf_counter()
            for _ in range(repeats):
                torch.mm(a, b)
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
            repeats *= 2
        best = min(best, elapsed / repeats)
    return best
