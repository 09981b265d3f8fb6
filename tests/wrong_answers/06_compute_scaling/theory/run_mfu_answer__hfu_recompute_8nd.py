# loses: run_mfu_tests
# why: counts 8ND (full recomputation): HFU, not MFU
def run_mfu(n_params, n_tokens, seconds, n_devices, peak_per_device):
    '''MFU of a run: (6 N D / seconds) / (n_devices * peak_per_device).'''
    for name, value in [("seconds", seconds), ("n_devices", n_devices), ("peak_per_device", peak_per_device),
                        ("n_params", n_params)]:
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    if not n_tokens >= 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    return 8.0 * n_params * n_tokens / seconds / (n_devices * peak_per_device)


mfu_th10 = run_mfu(7e9, 300e9, 14 * 86400, 512, 312e12)
print(f"TH-10: MFU = {mfu_th10:.4f}")
