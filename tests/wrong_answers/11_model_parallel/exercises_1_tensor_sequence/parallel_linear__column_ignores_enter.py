# loses: column_parallel_tests
# why: the column layer always applies f: enter=GatherFromSP is dropped
class ColumnParallelLinear(nn.Module):
    def __init__(self, linear, enter=None):
        super().__init__()
        rank, t = dist.get_rank(), dist.get_world_size()
        n = linear.out_features
        if n % t:
            raise ValueError(f"the world size {t} must divide out_features={n}")
        k = n // t
        self.enter = CopyToTP.apply
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
        if n % t:
            raise ValueError(f"the world size {t} must divide in_features={n}")
        k = n // t
        self.exit = ReduceFromTP.apply if exit is None else exit
        self.weight = nn.Parameter(linear.weight.detach()[:, rank * k:(rank + 1) * k].clone())
        self.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None

    def forward(self, x):
        y = self.exit(F.linear(x, self.weight))
        return y + self.bias if self.bias is not None else y
