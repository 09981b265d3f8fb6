# loses: aux_loss_tests
# why: z-loss squares the largest logit instead of the logsumexp
def balancing_loss(logits, experts):
    n = logits.shape[1]
    f = torch.bincount(experts.reshape(-1), minlength=n).to(logits.dtype) / experts.numel()
    return n * (f * torch.softmax(logits, dim=-1).mean(0)).sum()


def router_z_loss(logits):
    return logits.max(dim=-1).values.pow(2).mean()
