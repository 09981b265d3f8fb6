# loses: sharded_optimizer_tests, sharded_optimizer_state_tests
# why: each rank owns whole parameter tensors (round robin), reduces each gradient to its owner and broadcasts the update: correct numbers, but the state is not 1/N of every parameter (uneven tensors) and the traffic is reduce + broadcast instead of reduce-scatter + all-gather
class MyShardedOptimizer:
    def __init__(self, params, optimizer_cls, stage=1, **kwargs):
        if not (isinstance(optimizer_cls, type) and issubclass(optimizer_cls, torch.optim.Optimizer)):
            raise ValueError(f"optimizer_cls must be a torch.optim.Optimizer subclass, got {optimizer_cls!r}")
        if isinstance(stage, bool) or stage not in (1, 2):
            raise ValueError(f"stage must be 1 or 2, got {stage!r}")
        groups = list(params)
        if not groups:
            raise ValueError("no parameters to optimize")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.world, self.rank, self.stage = dist.get_world_size(), dist.get_rank(), stage
        self.owned, local_groups, k = [], [], 0      # (param, owner, copy or None)
        for g in groups:
            mine = []
            for p in g["params"]:
                owner = k % self.world
                k += 1
                copy = p.detach().clone().requires_grad_(True) if owner == self.rank else None
                self.owned.append((p, owner, copy))
                if copy is not None:
                    mine.append(copy)
            local_groups.append({**{key: v for key, v in g.items() if key != "params"}, "params": mine})
        self.optimizer = optimizer_cls([g for g in local_groups if g["params"]] or [{"params": []}], **kwargs)

    @torch.no_grad()
    def step(self):
        for p, owner, copy in self.owned:
            g = p.grad.clone() if p.grad is not None else torch.zeros_like(p)
            dist.reduce(g, dst=owner, op=dist.ReduceOp.SUM)
            if copy is not None:
                copy.grad = g / self.world
            p.grad = None
        self.optimizer.step()
        for p, owner, copy in self.owned:
            buf = copy.detach().clone() if copy is not None else torch.empty_like(p)
            dist.broadcast(buf, src=owner)
            p.copy_(buf)

    def zero_grad(self):
        for p, _, _ in self.owned:
            p.grad = None

    def state_dict(self):
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict["optimizer"])
