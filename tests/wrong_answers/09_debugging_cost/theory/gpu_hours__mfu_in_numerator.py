# loses: gpu_hours_tests
# why: multiplies by the MFU instead of dividing: a less efficient run looks cheaper
def gpu_hours(n_params, n_tokens, n_gpus, mfu, peak_flops=312e12):
    if n_params <= 0 or n_tokens <= 0 or n_gpus <= 0 or peak_flops <= 0 or not 0 < mfu <= 1:
        raise ValueError("sizes, GPUs and peak must be > 0 and mfu in (0, 1]")
    seconds = 6 * n_params * n_tokens * mfu / (n_gpus * peak_flops)
    return n_gpus * seconds / 3600
