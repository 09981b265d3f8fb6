# loses: resume_tests
# why: only the weights are saved: AdamW restarts with zero moments and step 0
def save_rank(model, optimizer, path):
    torch.save({"model": model.state_dict()}, path)


def load_rank(model, optimizer, path):
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
