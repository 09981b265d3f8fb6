# loses: grad_scaler_tests
# why: records the scale after the step's update instead of the scale the step used
def simulate_grad_scaler(grads, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                         growth_interval=2000, dtype=torch.float16, keep_fp32=None):
    """GradScaler's dynamic loss scale on a known (steps, values) gradient stream."""
    if not init_scale > 0:
        raise ValueError(f"init_scale must be > 0, got {init_scale}")
    if not growth_factor > 1:
        raise ValueError(f"growth_factor must be > 1, got {growth_factor}")
    if not 0 < backoff_factor < 1:
        raise ValueError(f"backoff_factor must lie in (0, 1), got {backoff_factor}")
    if growth_interval < 1:
        raise ValueError(f"growth_interval must be >= 1, got {growth_interval}")
    g = torch.as_tensor(np.asarray(grads, dtype=np.float32))
    if g.ndim == 1:
        g = g[:, None]
    mask = None if keep_fp32 is None else torch.as_tensor(np.asarray(keep_fp32, dtype=bool))
    scale = float(np.float32(init_scale))
    good = 0
    scales, skipped = [], []
    for row in g:
        scaled = row * torch.tensor(scale, dtype=torch.float32)
        out = scaled.to(dtype).float()
        if mask is not None:
            out = torch.where(mask, scaled, out)
        if bool(torch.isfinite(out).all()):
            skipped.append(False)
            good += 1
            if good == growth_interval:
                with np.errstate(over="ignore"):       # an fp32 overflow gives inf: keep the old scale
                    grown = float(np.float32(scale * growth_factor))
                if math.isfinite(grown):
                    scale = grown
                good = 0
        else:
            skipped.append(True)
            scale = float(np.float32(scale * backoff_factor))
            good = 0
        scales.append(scale)
    return {"scales": scales, "skipped": skipped, "final_scale": scale}


demo = np.full((12, 3), 1e-3, dtype=np.float32)
demo[4, 1], demo[7, 0], demo[9, 2] = np.inf, np.nan, 1e6
trace = simulate_grad_scaler(demo, init_scale=2.0 ** 10, growth_interval=3)
print("log2 scale per step:", [int(math.log2(s)) for s in trace["scales"]])
print("skipped steps      :", [t for t, k in enumerate(trace["skipped"]) if k])
