# loses: g_operator_tests
# why: g all-reduces its input in place: the forward changes x
class CopyToTP(torch.autograd.Function):
    # f: identity forward, all-reduce (sum) of the gradient backward

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad


class ReduceFromTP(torch.autograd.Function):
    # g: all-reduce (sum) forward, identity backward

    @staticmethod
    def forward(ctx, x):
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad
