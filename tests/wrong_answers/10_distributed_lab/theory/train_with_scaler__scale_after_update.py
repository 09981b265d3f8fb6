# loses: train_with_scaler_tests
# why: the scale is recorded after update(), not the one the step used
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
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        params.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone())
    return params, scales
