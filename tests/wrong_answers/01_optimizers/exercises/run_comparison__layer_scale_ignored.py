# loses: run_comparison_control_tests
# why: accepts layer_scale but builds make_mlp(seed): the control runs on the scaled layers again
def run_comparison(batch_sizes=(256, 2048, 16384), epochs=12, seed=0, n_samples=16384, layer_scale=None):
    """Train AdamW and Lamb at each batch size; return {(opt, batch): array of epochs+1 full-set losses}."""
    x, y = make_regression_data(n_samples, seed)
    results = {}
    for name in ("adamw", "lamb"):
        for batch in batch_sizes:
            model = make_mlp(seed)
            lr = BASE_LR[name] * batch / BASE_BATCH
            if name == "adamw":
                opt = torch.optim.AdamW(model.parameters(), lr=lr, eps=1e-8, weight_decay=WEIGHT_DECAY)
            else:
                opt = Lamb(model.parameters(), lr=lr, eps=1e-6, weight_decay=WEIGHT_DECAY)
            steps_per_epoch = math.ceil(n_samples / batch)
            warmup = max(1, round(WARMUP_FRACTION * epochs * steps_per_epoch))
            gen = torch.Generator().manual_seed(seed)
            losses, k = [full_loss(model, x, y)], 0
            for _ in range(epochs):
                order = torch.randperm(n_samples, generator=gen)
                for start in range(0, n_samples, batch):
                    idx = order[start:start + batch]
                    k += 1
                    for group in opt.param_groups:
                        group["lr"] = lr * min(1.0, k / warmup)
                    loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                losses.append(full_loss(model, x, y))
            results[(name, batch)] = np.array(losses)
    return results
