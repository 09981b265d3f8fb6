# loses: resume_tests
# why: the checkpoint stores the weights in float32 to save space: close, not equal
def save_rank(model, optimizer, path):
    torch.save({"model": {k: v.float() for k, v in model.state_dict().items()}, "optimizer": optimizer.state_dict()}, path)


def load_rank(model, optimizer, path):
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
