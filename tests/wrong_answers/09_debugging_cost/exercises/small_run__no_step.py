# loses: small_run_tests
# why: opt.step() missing: the model never learns
def small_run(seed, steps=100):
    torch.manual_seed(seed)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = RowLoader(synthetic_tokens(256, 17), 8, seed=seed)
    losses = []
    for _ in range(steps):
        rows = loader.next()
        loss = F.cross_entropy(model(rows[:, :-1]).flatten(0, 1), rows[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        losses.append(loss.item())
    return losses
