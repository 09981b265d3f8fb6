# loses: train_with_scaler_tests
# why: unscale and step the optimizer directly: the NaN step is not skipped
def train_with_scaler(model, x, y, n_steps, bad_step, init_scale=1024.0, lr=0.1):
    opt = PlainSGD(model.parameters(), lr)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    params, scales = [], []
    for step in range(n_steps):
        for p in model.parameters():
            p.grad = None
        loss = ((model(x) - y) ** 2).mean()
        scaler.scale(loss).backward()
        if step == bad_step:
            model.weight.grad[0, 0] = float("nan")
        scales.append(scaler.get_scale())
        scaler.unscale_(opt)
        opt.step()
        scaler.update()
        params.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone())
    return params, scales
