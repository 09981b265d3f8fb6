# loses: aux_loss_tests
# why: f_i divided by T instead of T k (fractions sum to k)
def balancing_loss(logits, experts):
    n = logits.shape[1]
    f = torch.bincount(experts.reshape(-1), minlength=n).to(logits.dtype) / experts.shape[0]
    return n * (f * torch.softmax(logits, dim=-1).mean(0)).sum()


def router_z_loss(logits):
    return torch.logsumexp(logits, dim=-1).pow(2).mean()
