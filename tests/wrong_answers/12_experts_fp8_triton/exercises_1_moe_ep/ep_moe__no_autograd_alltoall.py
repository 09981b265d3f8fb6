# loses: ep_tests, ep_comm_tests
# why: rows exchanged with a plain all_to_all_single outside autograd: forward right, no gradient travels back
def ep_moe(x, router_weight, local_experts, top_k, n_experts, group=None):
    class AllToAll(torch.autograd.Function):      # rows out by in_splits, back in by out_splits; backward: reversed
        @staticmethod
        def forward(ctx, rows, out_splits, in_splits):
            ctx.splits = (out_splits, in_splits)
            out = rows.new_empty((sum(out_splits), rows.shape[1]))
            dist.all_to_all_single(out, rows.contiguous(), out_splits, in_splits, group=group)
            return out

        @staticmethod
        def backward(ctx, grad):
            out_splits, in_splits = ctx.splits
            back = grad.new_empty((sum(in_splits), grad.shape[1]))
            dist.all_to_all_single(back, grad.contiguous(), in_splits, out_splits, group=group)
            return back, None, None

    n = dist.get_world_size(group)
    per = n_experts // n
    gates, chosen = top_k_route(x @ router_weight, top_k)
    flat = chosen.reshape(-1)
    order = torch.argsort(flat, stable=True)
    send = torch.bincount(flat, minlength=n_experts)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    recv = recv.view(n, per)
    in_splits, out_splits = send.view(n, per).sum(1).tolist(), recv.sum(1).tolist()
    rows = x.new_empty((sum(out_splits), x.shape[1]))
    dist.all_to_all_single(rows, x[order // top_k].detach().contiguous(), out_splits, in_splits, group=group)
    local = torch.repeat_interleave(torch.arange(per).repeat(n), recv.reshape(-1))
    out = rows * 0
    for i in range(per):
        sel = torch.nonzero(local == i, as_tuple=True)[0]
        if sel.numel():
            out = out.index_add(0, sel, local_experts[i](rows[sel]))
    back = x.new_empty((sum(in_splits), x.shape[1]))
    dist.all_to_all_single(back, out.detach().contiguous(), in_splits, out_splits, group=group)
    return torch.zeros_like(x).index_add(0, order // top_k, gates.reshape(-1)[order].unsqueeze(1) * back)
