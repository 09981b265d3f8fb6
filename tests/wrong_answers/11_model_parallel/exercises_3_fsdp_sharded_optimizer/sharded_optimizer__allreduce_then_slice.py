# loses: sharded_optimizer_tests, sharded_optimizer_stage2_tests
# why: the gradient reduction is an all-reduce of the whole padded gradient, then a slice: right numbers, twice the traffic and P entries on every rank
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
        self.pieces, local_groups = [], []          # (param, s, lo, hi, piece)
        for g in groups:
            mine = []
            for p in g["params"]:
                n = p.numel()
                s = -(-n // self.world)
                lo, hi = min(self.rank * s, n), min((self.rank + 1) * s, n)
                piece = p.detach().reshape(-1)[lo:hi].clone().requires_grad_(True)
                self.pieces.append((p, s, lo, hi, piece))
                mine.append(piece)
            local_groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": mine})
        self.optimizer = optimizer_cls(local_groups, **kwargs)
        self.grad_shards = {}
        if stage == 2:
            for p, s, *_ in self.pieces:
                p.register_post_accumulate_grad_hook(lambda t, s=s: self._reduce_scatter(t, s))

    def _reduce_scatter(self, p, s):
        """Reduce-scatter p.grad (zero-padded to N s entries, SUM) and keep this rank's s entries
        (summed into the shard already kept, if any); set p.grad = None. Stage 1 calls it from
        step(), stage 2 from the post-accumulate-grad hooks."""
        padded = torch.zeros(s * self.world, dtype=p.dtype)
        if p.grad is not None:
            padded[:p.numel()] = p.grad.reshape(-1)
        dist.all_reduce(padded, op=dist.ReduceOp.SUM)
        out = padded[self.rank * s:(self.rank + 1) * s].clone()
        if id(p) in self.grad_shards:
            self.grad_shards[id(p)] += out
        else:
            self.grad_shards[id(p)] = out
        p.grad = None

    @torch.no_grad()
    def step(self):
        for p, s, lo, hi, piece in self.pieces:
            if self.stage == 1:
                self._reduce_scatter(p, s)
            g = self.grad_shards.pop(id(p), None)
            if g is None:
                g = torch.zeros(s, dtype=p.dtype)
            piece.grad = g[:hi - lo] / self.world
        self.optimizer.step()
        for p, s, lo, hi, piece in self.pieces:
            mine = torch.zeros(s, dtype=p.dtype)
            mine[:hi - lo] = piece
            full = torch.empty(s * self.world, dtype=p.dtype)
            dist.all_gather_into_tensor(full, mine)
            p.copy_(full[:p.numel()].view_as(p))
            piece.grad = None

    def zero_grad(self):
        for p, *_ in self.pieces:
            p.grad = None
        self.grad_shards = {}

    def state_dict(self):
        return {"world": self.world, "rank": self.rank, "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state_dict):
        if state_dict.get("world") != self.world or state_dict.get("rank") != self.rank:
            raise ValueError("this state dict was saved by another rank or world size")
        self.optimizer.load_state_dict(state_dict["optimizer"])
