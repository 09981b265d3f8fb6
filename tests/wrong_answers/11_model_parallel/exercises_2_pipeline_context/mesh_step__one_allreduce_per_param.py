# loses: mesh_step_comm_tests
# why: averages each of the four gradients with its own all-reduce: 4 collectives in the DP group instead of one flat one
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
    for p in params:
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, group=dp_group)
        p.grad /= dist.get_world_size(dp_group)
    return loss.item()
