# loses: mesh_step_tests
# why: the DP all-reduce sums the replicas' gradients without dividing by dp
class SumOverGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        out = x.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def tp_dp_step(shard, x, y, tp_group, dp_group):
    h = torch.tanh(x @ shard["w1"].T + shard["b1"])
    out = SumOverGroup.apply(h @ shard["w2"].T, tp_group) + shard["b2"]
    loss = F.mse_loss(out, y)
    loss.backward()
    params = [shard[name] for name in ("w1", "b1", "w2", "b2")]
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=dp_group)
    o = 0
    for p in params:
        p.grad.copy_(flat[o:o + p.numel()].view_as(p.grad))
        o += p.numel()
    return loss.item()
