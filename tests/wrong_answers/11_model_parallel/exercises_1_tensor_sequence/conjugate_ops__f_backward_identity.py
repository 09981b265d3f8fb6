# loses: f_operator_tests
# why: f passes the gradient through: the ranks' dX terms are never summed
class CopyToTP(torch.autograd.Function):
    # f: identity forward, all-reduce (sum) of the gradient backward

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class ReduceFromTP(torch.autograd.Function):
    # g: all-reduce (sum) forward, identity backward

    @staticmethod
    def forward(ctx, x):
        y = x.contiguous().clone()
        dist.all_reduce(y, op=dist.ReduceOp.SUM)
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad
