# loses: mfu_tests
# why: adds full recomputation's FLOPs (8N/6N): that is HFU, not MFU
def mfu(model_flops_per_second, peak_flops_per_second):
    '''Model FLOPs utilisation: achieved model FLOP/s over peak FLOP/s (dimensionless).'''
    if not peak_flops_per_second > 0:
        raise ValueError(f"peak_flops_per_second must be > 0, got {peak_flops_per_second}")
    if not model_flops_per_second >= 0:
        raise ValueError(f"model_flops_per_second must be >= 0, got {model_flops_per_second}")
    return model_flops_per_second * 8.0 / 6.0 / peak_flops_per_second
