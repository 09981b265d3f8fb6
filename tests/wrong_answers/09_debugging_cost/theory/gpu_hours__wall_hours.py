# loses: gpu_hours_tests
# why: wall-clock hours, not GPU-hours: forgets to multiply by the number of GPUs
def gpu_hours(n_params, n_tokens, n_gpus, mfu, peak_flops=312e12):
    if n_params <= 0 or n_tokens <= 0 or n_gpus <= 0 or peak_flops <= 0 or not 0 < mfu <= 1:
        raise ValueError("sizes, GPUs and peak must be > 0 and mfu in (0, 1]")
    seconds = 6 * n_params * n_tokens / (n_gpus * peak_flops * mfu)
    return seconds / 3600
