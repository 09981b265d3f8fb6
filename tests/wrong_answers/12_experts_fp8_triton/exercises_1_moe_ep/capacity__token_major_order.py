# loses: capacity_tests
# why: priority token by token (a token's second choice before the next token's first), not all first choices first
def expert_capacity(tokens, n_experts, top_k, capacity_factor):
    return math.ceil(capacity_factor * tokens * top_k / n_experts)


def capacity_keep(experts, n_experts, capacity):
    order = experts.reshape(-1)
    onehot = F.one_hot(order.long(), n_experts)
    place = (onehot.cumsum(0) * onehot).sum(1) - 1
    return (place < capacity).reshape(experts.shape)
