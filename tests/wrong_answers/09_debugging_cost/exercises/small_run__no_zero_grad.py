# loses: small_run_tests
# why: gradients never zeroed: every step applies the sum of all gradients so far
def small_run(seed, steps=100):
    torch.manual_seed(seed)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = RowLoader(synthetic_tokens(256, 17), 8, seed=seed)
    losses = []
    for _ in range(steps):
        rows = loader.next()
        loss = F.cross_entropy(model(rows[:, :-1]).flatten(0, 1), rows[:, 1:].flatten())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
