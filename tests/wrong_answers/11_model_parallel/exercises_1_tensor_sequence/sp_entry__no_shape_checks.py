# loses: sp_entry_validation
# why: no argument checks: a wrong in_features or bias fails inside torch (RuntimeError), not with a ValueError
class SPColumnLinear(torch.autograd.Function):
    # gather(x_shard) W^T + b along the sequence (dim 1); keeps only the shard, gathers it again in backward

    @staticmethod
    def forward(ctx, x_shard, weight, bias):
        t = dist.get_world_size()
        xs = x_shard.transpose(0, 1).contiguous()
        full = torch.empty((t * xs.shape[0],) + tuple(xs.shape[1:]), dtype=x_shard.dtype)
        dist.all_gather_into_tensor(full, xs)
        ctx.save_for_backward(x_shard, weight)
        ctx.has_bias = bias is not None
        return F.linear(full.transpose(0, 1), weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x_shard, weight = ctx.saved_tensors
        t = dist.get_world_size()
        xs = x_shard.transpose(0, 1).contiguous()
        full = torch.empty((t * xs.shape[0],) + tuple(xs.shape[1:]), dtype=x_shard.dtype)
        dist.all_gather_into_tensor(full, xs)                  # the input again, (s, b, n_in)
        gs = grad.transpose(0, 1).contiguous()                 # (s, b, k)
        grad_in = (gs @ weight).contiguous()                   # this rank's part of dX, (s, b, n_in)
        grad_x = torch.empty((grad_in.shape[0] // t,) + tuple(grad_in.shape[1:]), dtype=grad.dtype)
        dist.reduce_scatter_tensor(grad_x, grad_in, op=dist.ReduceOp.SUM)
        g2 = gs.reshape(-1, gs.shape[-1])
        grad_w = g2.t() @ full.reshape(-1, full.shape[-1])
        grad_b = g2.sum(0) if ctx.has_bias else None
        return grad_x.transpose(0, 1).contiguous(), grad_w, grad_b
