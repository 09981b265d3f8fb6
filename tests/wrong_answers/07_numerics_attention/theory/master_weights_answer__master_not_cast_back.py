# loses: master_weights_tests
# why: returns the fp32 master itself, not the working copy cast to dtype
def apply_updates(w0, updates, dtype, master_dtype=None):
    """Final working weight after w <- w + u for every u, rounding as described above."""
    if master_dtype is None:
        w = torch.tensor(float(w0), dtype=dtype)
        for u in updates:
            w = w + torch.tensor(float(u), dtype=dtype)
        return float(w)
    m = torch.tensor(float(w0), dtype=master_dtype)
    for u in updates:
        m = m + torch.tensor(float(u), dtype=master_dtype)
    return float(m)


state_gb_7b = 7e9 * (2 + 2 + 4 + 4 + 4) / 1e9
print(apply_updates(1.0, [1e-3] * 1000, torch.bfloat16), apply_updates(1.0, [1e-3] * 1000, torch.bfloat16, torch.float32))
print(f"model state of the 7B model: {state_gb_7b:.0f} GB")
