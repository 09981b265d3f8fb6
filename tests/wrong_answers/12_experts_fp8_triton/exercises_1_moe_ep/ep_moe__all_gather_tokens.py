# loses: ep_tests, ep_comm_tests
# why: the shortcut: all-gather every token and all-reduce the outputs instead of all-to-all dispatch/combine
def ep_moe(x, router_weight, local_experts, top_k, n_experts, group=None):
    # every rank gathers every token, runs its own experts on all of them, and an all-reduce sums the parts
    import torch.distributed.nn.functional as dnn
    n, r = dist.get_world_size(group), dist.get_rank(group)
    per = n_experts // n
    size = torch.tensor([x.shape[0]])
    sizes = [torch.zeros_like(size) for _ in range(n)]
    dist.all_gather(sizes, size, group=group)
    sizes = [int(s) for s in sizes]
    padded = torch.cat([x, x.new_zeros(max(sizes) - x.shape[0], x.shape[1])])
    x_all = torch.cat([t[:s] for t, s in zip(dnn.all_gather(padded, group=group), sizes)])
    gates, chosen = top_k_route(x_all @ router_weight, top_k)
    y = torch.zeros_like(x_all)
    for i in range(per):
        tok, slot = torch.nonzero(chosen == r * per + i, as_tuple=True)
        if tok.numel():
            y = y.index_add(0, tok, gates[tok, slot].unsqueeze(1) * local_experts[i](x_all[tok]))
    y = dnn.all_reduce(y, group=group)
    start = sum(sizes[:r])
    return y[start:start + x.shape[0]]
