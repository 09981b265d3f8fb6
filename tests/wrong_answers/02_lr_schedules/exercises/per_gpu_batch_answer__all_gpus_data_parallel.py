# loses: per_gpu_batch_tests
# why: dp = n_gpus always: the global batch exceeds b_crit
def plan_per_gpu_batch(b_crit, n_gpus, min_per_gpu=1):
    """(per_gpu_batch, dp, model_parallel) keeping the global batch at or under b_crit."""
    if b_crit < 1 or n_gpus < 1 or min_per_gpu < 1:
        raise ValueError(f"b_crit, n_gpus and min_per_gpu must be >= 1, got {b_crit}, {n_gpus}, {min_per_gpu}")
    if min_per_gpu > b_crit:
        raise ValueError(f"min_per_gpu={min_per_gpu} exceeds b_crit={b_crit}")
    dp = n_gpus
    return b_crit // dp, dp, n_gpus // dp


for args in [(4096, 16), (4096, 128), (4096, 128, 64)]:
    print(args, "->", plan_per_gpu_batch(*args))
