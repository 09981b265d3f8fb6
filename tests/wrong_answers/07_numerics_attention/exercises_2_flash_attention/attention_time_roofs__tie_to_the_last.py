# loses: attention_time_roofs_tests
# why: on a tie keeps the last maximum, so a kernel at the ridge is called exp- or memory-bound
def attention_time_roofs(seq_len, head_dim, hbm_bytes, peak_flops, bandwidth, exp_per_second, causal=False):
    """Seconds of one head's attention forward under three roofs (matmul, memory, exp), the largest, and its name."""
    for name, value in (("seq_len", seq_len), ("head_dim", head_dim)):
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    for name, value in (("hbm_bytes", hbm_bytes), ("peak_flops", peak_flops), ("bandwidth", bandwidth),
                        ("exp_per_second", exp_per_second)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    n = int(seq_len)
    scores = n * (n + 1) // 2 if causal else n * n        # one exponential per score the mask keeps
    roofs = {"matmul": 4.0 * head_dim * scores / peak_flops, "memory": hbm_bytes / bandwidth,
             "exp": scores / exp_per_second}
    time = max(roofs.values())
    bound = [name for name in ("matmul", "memory", "exp") if roofs[name] == time][-1]
    return {**roofs, "time": time, "bound": bound, "scores": scores}


for d in (64, 128):
    r = attention_time_roofs(8192, d, 4 * 8192 * d * 2, H100_BF16, H100_BW, H100_EXP, causal=True)
    print(f"d = {d}: " + ", ".join(f"{k} {r[k] * 1e6:.1f} us" for k in ("matmul", "memory", "exp")) + f" -> {r['bound']}")

