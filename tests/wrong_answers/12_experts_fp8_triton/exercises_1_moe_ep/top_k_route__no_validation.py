# loses: route_validation
# why: no argument checks: k = 0 returns empty gates, k > E raises RuntimeError
def top_k_route(logits, k):
    probs = torch.softmax(logits, dim=-1)
    top, experts = probs.topk(k, dim=-1)
    return top / top.sum(dim=-1, keepdim=True), experts
