# loses: loss_scaling_tests
# why: the round trip never divides by the scale again
def fp16_roundtrip(grads, scale):
    """fp16(fp32(grads) * scale) / scale as float64: underflow gives 0, overflow inf."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    g = torch.as_tensor(np.asarray(grads, dtype=np.float32))
    return (g * torch.tensor(scale, dtype=torch.float32)).half().double().numpy()


def largest_safe_scale(grads):
    """Largest 2**k, 0 <= k <= 24, whose fp16 round trip has no inf; None if none."""
    for k in range(24, -1, -1):
        if np.all(np.isfinite(fp16_roundtrip(grads, 2.0 ** k))):
            return 2.0 ** k
    return None


print(fp16_roundtrip(np.array([1e-9, 1e-6, 1.0]), 1.0), fp16_roundtrip(np.array([1e-9, 1e-6, 1.0]), 2.0 ** 16))
print("largest safe scale for the sample above:", largest_safe_scale(grads))
