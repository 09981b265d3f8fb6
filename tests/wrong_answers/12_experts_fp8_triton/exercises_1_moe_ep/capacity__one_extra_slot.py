# loses: capacity_tests
# why: off by one: keeps C + 1 assignments per expert
def expert_capacity(tokens, n_experts, top_k, capacity_factor):
    return math.ceil(capacity_factor * tokens * top_k / n_experts)


def capacity_keep(experts, n_experts, capacity):
    order = experts.t().reshape(-1)
    onehot = F.one_hot(order.long(), n_experts)
    place = (onehot.cumsum(0) * onehot).sum(1) - 1
    return (place <= capacity).reshape(experts.shape[1], experts.shape[0]).t()
