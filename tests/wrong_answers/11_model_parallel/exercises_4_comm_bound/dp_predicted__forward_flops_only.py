# loses: dp_predicted_tests
# why: 2P FLOPs per token (forward only) instead of 6P
def predicted_dp_crossover(n_params, world_size, alpha, bandwidth, flops_per_s, bytes_per_element=4):
    for name, v in (("n_params", n_params), ("world_size", world_size)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    for name, v, lo_ok in (("alpha", alpha, True), ("bandwidth", bandwidth, False),
                           ("flops_per_s", flops_per_s, False), ("bytes_per_element", bytes_per_element, False)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v) \
                or v < 0 or (v == 0 and not lo_ok):
            raise ValueError(f"{name} must be a finite number {'>= 0' if lo_ok else '> 0'}, got {v!r}")
    n = int(world_size)
    comm = 2 * (n - 1) * alpha + 2 * (n - 1) / n * n_params * bytes_per_element / bandwidth
    return comm * flops_per_s / (2 * n_params)


t_star_h100 = predicted_dp_crossover(12 * 8192 ** 2, 64, 5e-6, 50e9, 400e12, 2)
print(f"one h = 8192 layer on 64 GPUs over InfiniBand: communication-bound below {t_star_h100:,.0f} tokens per GPU")
