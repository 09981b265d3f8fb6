# loses: aux_loss_tests
# why: P detached: the balancing loss sends no gradient to the router
def balancing_loss(logits, experts):
    n = logits.shape[1]
    f = torch.bincount(experts.reshape(-1), minlength=n).to(logits.dtype) / experts.numel()
    return n * (f * torch.softmax(logits.detach(), dim=-1).mean(0)).sum()


def router_z_loss(logits):
    return torch.logsumexp(logits, dim=-1).pow(2).mean()
