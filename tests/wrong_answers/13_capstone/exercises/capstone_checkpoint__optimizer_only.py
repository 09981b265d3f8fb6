# loses: resume_tests
# why: only the optimizer state is restored: the weights stay at their initial values
def save_rank(model, optimizer, path):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)


def load_rank(model, optimizer, path):
    state = torch.load(path, weights_only=True)
    optimizer.load_state_dict(state["optimizer"])
