# loses: precision_run_tests
# why: the fp16_safe_lr run uses the team's learning rate
def train_in_precision(fmt, peak_lr, steps=300, warmup=100, seed=0):
    """Full-batch GD on precision_task(seed) with the output cast through fmt; per-step loss and max |out|."""
    dtypes = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
    if fmt not in dtypes:
        raise ValueError(f"fmt must be one of {sorted(dtypes)}, got {fmt!r}")
    x, y, model = precision_task(seed)
    losses, max_abs = [], []
    for t in range(steps):
        out = model(x)
        if dtypes[fmt] is not None:
            out = out.to(dtypes[fmt]).float()
        loss = F.mse_loss(out, y)
        losses.append(float(loss.detach()))
        max_abs.append(float(out.detach().abs().max()))
        model.zero_grad()
        loss.backward()
        lr_t = peak_lr * min(1.0, (t + 1) / warmup)
        with torch.no_grad():
            for p in model.parameters():
                p -= lr_t * p.grad
    return {"loss": np.array(losses), "max_abs_out": np.array(max_abs)}


torch.set_num_threads(1)     # tiny matrices: one thread is faster on a busy 2-core machine
runs = {"fp32": train_in_precision("fp32", TEAM_LR), "bf16": train_in_precision("bf16", TEAM_LR),
        "fp16": train_in_precision("fp16", TEAM_LR), "fp16_safe_lr": train_in_precision("fp16", TEAM_LR)}
torch.set_num_threads(2)
for name, run in runs.items():
    print(f"{name:>13}: loss at step 99 {run['loss'][99]:.4g}, final loss {run['loss'][-1]:.4g}, "
          f"final max|out| {run['max_abs_out'][-1]:.4g}")
