# loses: sp_entry_saved_tests, sp_entry_comm_tests
# why: keeps the gathered input for backward (right gradients, t times the bytes, no second all-gather)
class SPColumnLinear(torch.autograd.Function):
    # gather(x_shard) W^T + b along the sequence (dim 1); keeps only the shard, gathers it again in backward

    @staticmethod
    def forward(ctx, x_shard, weight, bias):
        if x_shard.dim() != 3:
            raise ValueError(f"x_shard must be 3-D (b, s/t, n_in), got shape {tuple(x_shard.shape)}")
        if x_shard.shape[-1] != weight.shape[1]:
            raise ValueError(f"x_shard's last dim {x_shard.shape[-1]} is not the weight's in_features {weight.shape[1]}")
        if bias is not None and tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")
        t = dist.get_world_size()
        xs = x_shard.transpose(0, 1).contiguous()
        full = torch.empty((t * xs.shape[0],) + tuple(xs.shape[1:]), dtype=x_shard.dtype)
        dist.all_gather_into_tensor(full, xs)
        ctx.save_for_backward(full, weight)
        ctx.has_bias = bias is not None
        return F.linear(full.transpose(0, 1), weight, bias)

    @staticmethod
    def backward(ctx, grad):
        full, weight = ctx.saved_tensors
        t = dist.get_world_size()
        gs = grad.transpose(0, 1).contiguous()                 # (s, b, k)
        grad_in = (gs @ weight).contiguous()                   # this rank's part of dX, (s, b, n_in)
        grad_x = torch.empty((grad_in.shape[0] // t,) + tuple(grad_in.shape[1:]), dtype=grad.dtype)
        dist.reduce_scatter_tensor(grad_x, grad_in, op=dist.ReduceOp.SUM)
        g2 = gs.reshape(-1, gs.shape[-1])
        grad_w = g2.t() @ full.reshape(-1, full.shape[-1])
        grad_b = g2.sum(0) if ctx.has_bias else None
        return grad_x.transpose(0, 1).contiguous(), grad_w, grad_b
