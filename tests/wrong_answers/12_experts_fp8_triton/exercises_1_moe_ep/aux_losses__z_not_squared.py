# loses: aux_loss_tests
# why: z-loss without the square: mean logsumexp
def balancing_loss(logits, experts):
    n = logits.shape[1]
    f = torch.bincount(experts.reshape(-1), minlength=n).to(logits.dtype) / experts.numel()
    return n * (f * torch.softmax(logits, dim=-1).mean(0)).sum()


def router_z_loss(logits):
    return torch.logsumexp(logits, dim=-1).mean()
