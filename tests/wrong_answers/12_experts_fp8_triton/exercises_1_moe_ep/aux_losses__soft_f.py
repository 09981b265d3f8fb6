# loses: aux_loss_tests
# why: f_i taken from the probabilities (E sum P_i^2) instead of the counted assignments
def balancing_loss(logits, experts):
    n = logits.shape[1]
    f = torch.softmax(logits, dim=-1).mean(0)
    return n * (f * torch.softmax(logits, dim=-1).mean(0)).sum()


def router_z_loss(logits):
    return torch.logsumexp(logits, dim=-1).pow(2).mean()
