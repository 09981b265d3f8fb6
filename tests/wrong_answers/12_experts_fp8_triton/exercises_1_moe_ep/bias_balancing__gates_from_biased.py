# loses: bias_tests
# why: gates read from the biased scores: the bias changes the mixing, not just the choice
def biased_route(logits, bias, k):
    p = torch.softmax(logits, dim=-1)
    experts = (p + bias).topk(k, dim=-1).indices
    top = (p + bias).gather(1, experts)
    return top / top.sum(dim=-1, keepdim=True), experts


def update_bias(bias, experts, n_experts, rate):
    load = torch.bincount(experts.reshape(-1), minlength=n_experts).to(bias.dtype)
    return bias + rate * torch.sign(experts.numel() / n_experts - load)
