# loses: moe_layer_tests, moe_capacity_tests
# why: expert outputs summed without the gates
def moe_layer(x, router_weight, experts, top_k, capacity_factor=None):
    n_experts = router_weight.shape[1]
    gates, chosen = top_k_route(x @ router_weight, top_k)
    if capacity_factor is None:
        keep = torch.ones_like(chosen, dtype=torch.bool)
    else:
        keep = capacity_keep(chosen, n_experts, expert_capacity(x.shape[0], n_experts, top_k, capacity_factor))
    y = torch.zeros_like(x)
    for i in range(n_experts):
        tok, slot = torch.nonzero((chosen == i) & keep, as_tuple=True)
        if tok.numel():
            y = y.index_add(0, tok, experts[i](x[tok]))
    return y
