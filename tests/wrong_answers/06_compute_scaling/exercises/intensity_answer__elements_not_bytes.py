# loses: intensity_tests
# why: divides by elements, not bytes: ignores bytes_per_element
def arithmetic_intensity(m, n, k, bytes_per_element=2):
    '''FLOP per byte of C = A @ B, A (m x k), B (k x n), ideal traffic: 2mnk / (b (mk + kn + mn)).'''
    for name, value in [("m", m), ("n", n), ("k", k), ("bytes_per_element", bytes_per_element)]:
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    flops = 2.0 * m * n * k
    traffic = 2 * (m * k + k * n + m * n)
    return flops / traffic
