# loses: parallel_linear_validation
# why: no ValueError when t does not divide the features
class ColumnParallelLinear(nn.Module):
    def __init__(self, linear, enter=None):
        super().__init__()
        rank, t = dist.get_rank(), dist.get_world_size()
        n = linear.out_features
        k = n // t
        self.enter = CopyToTP.apply if enter is None else enter
        self.weight = nn.Parameter(linear.weight.detach()[rank * k:(rank + 1) * k].clone())
        self.bias = (nn.Parameter(linear.bias.detach()[rank * k:(rank + 1) * k].clone())
                     if linear.bias is not None else None)

    def forward(self, x):
        return F.linear(self.enter(x), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, linear, exit=None):
        super().__init__()
        rank, t = dist.get_rank(), dist.get_world_size()
        n = linear.in_features
        k = n // t
        self.exit = ReduceFromTP.apply if exit is None else exit
        self.weight = nn.Parameter(linear.weight.detach()[:, rank * k:(rank + 1) * k].clone())
        self.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None

    def forward(self, x):
        y = self.exit(F.linear(x, self.weight))
        return y + self.bias if self.bias is not None else y
