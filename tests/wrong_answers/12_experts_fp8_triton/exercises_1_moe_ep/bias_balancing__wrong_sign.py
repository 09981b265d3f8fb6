# loses: bias_tests
# why: overloaded experts get a larger bias (sign flipped)
def biased_route(logits, bias, k):
    p = torch.softmax(logits, dim=-1)
    experts = (p + bias).topk(k, dim=-1).indices
    top = p.gather(1, experts)
    return top / top.sum(dim=-1, keepdim=True), experts


def update_bias(bias, experts, n_experts, rate):
    load = torch.bincount(experts.reshape(-1), minlength=n_experts).to(bias.dtype)
    return bias + rate * torch.sign(load - experts.numel() / n_experts)
