# loses: route_tests
# why: picks the k least likely experts
def top_k_route(logits, k):
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        raise ValueError("logits must be a tensor of shape (tokens, experts)")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= logits.shape[1]:
        raise ValueError(f"k must be an int in [1, {logits.shape[1]}], got {k!r}")
    probs = torch.softmax(logits, dim=-1)
    top, experts = probs.topk(k, dim=-1, largest=False)
    return top / top.sum(dim=-1, keepdim=True), experts
