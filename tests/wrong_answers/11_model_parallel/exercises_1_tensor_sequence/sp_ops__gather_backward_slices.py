# loses: sp_gather_tests
# why: GatherFromSP's backward keeps its tokens of the local gradient: no reduce-scatter
class GatherFromSP(torch.autograd.Function):
    # all-gather along the sequence (dim 1) forward, reduce-scatter backward

    @staticmethod
    def forward(ctx, x):
        t = dist.get_world_size()
        xs = x.transpose(0, 1).contiguous()
        out = torch.empty((t * xs.shape[0],) + tuple(xs.shape[1:]), dtype=x.dtype)
        dist.all_gather_into_tensor(out, xs)
        return out.transpose(0, 1).contiguous()

    @staticmethod
    def backward(ctx, grad):
        t = dist.get_world_size()
        k = grad.shape[1] // t
        r = dist.get_rank()
        return grad[:, r * k:(r + 1) * k].contiguous()


class ScatterToSP(torch.autograd.Function):
    # reduce-scatter along the sequence (dim 1) forward, all-gather backward

    @staticmethod
    def forward(ctx, x):
        t = dist.get_world_size()
        if x.shape[1] % t:
            raise ValueError(f"the world size {t} must divide the sequence length {x.shape[1]}")
        xs = x.transpose(0, 1).contiguous()
        out = torch.empty((xs.shape[0] // t,) + tuple(xs.shape[1:]), dtype=x.dtype)
        dist.reduce_scatter_tensor(out, xs, op=dist.ReduceOp.SUM)
        return out.transpose(0, 1).contiguous()

    @staticmethod
    def backward(ctx, grad):
        t = dist.get_world_size()
        gs = grad.transpose(0, 1).contiguous()
        out = torch.empty((t * gs.shape[0],) + tuple(gs.shape[1:]), dtype=grad.dtype)
        dist.all_gather_into_tensor(out, gs)
        return out.transpose(0, 1).contiguous()
