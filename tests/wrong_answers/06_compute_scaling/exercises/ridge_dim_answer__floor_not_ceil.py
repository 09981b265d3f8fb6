# loses: ridge_dim_tests
# why: rounds down: the floor of 1.5 b P/W is not compute-bound
def square_ridge_dim(peak_flops, bandwidth, bytes_per_element=2):
    '''Smallest d for which a square d x d x d GEMM is compute bound on a (peak, bandwidth) machine.'''
    # Square GEMM: I(d) = 2 d^3 / (b * 3 d^2) = 2 d / (3 b). Compute bound when I(d) >= P / W,
    # i.e. d >= 1.5 * b * P / W: the smallest integer is the ceiling of that.
    for name, value in [("peak_flops", peak_flops), ("bandwidth", bandwidth), ("bytes_per_element", bytes_per_element)]:
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    ridge = peak_flops / bandwidth
    d = math.floor(1.5 * bytes_per_element * ridge + 1e-9)
    return max(int(d), 1)


d_a100 = square_ridge_dim(312e12, 2.0e12)
print("A100, fp16: a square GEMM is compute-bound from d =", d_a100)
