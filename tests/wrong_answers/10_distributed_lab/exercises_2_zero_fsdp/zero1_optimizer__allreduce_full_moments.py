# loses: zero1_bytes_comm_tests
# why: no sharding: all-reduce the whole gradient and keep both moments for all P entries on every rank (DDP + AdamW)
class MyZeroAdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("no trainable parameters to optimize")
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.numel = sum(p.numel() for p in self.params)
        self.shard = -(-self.numel // self.world)          # ceil(P / N)
        self.padded = self.shard * self.world
        self.start = self.rank * self.shard
        self.exp_avg = torch.zeros(self.padded)
        self.exp_avg_sq = torch.zeros(self.padded)
        self.t = 0

    @torch.no_grad()
    def step(self):
        def flat(tensors):   # zero-padded flat copy of one tensor per parameter (None: zeros)
            out = torch.zeros(self.padded)
            o = 0
            for p, t in zip(self.params, tensors):
                if t is not None:
                    out[o:o + p.numel()] = t.reshape(-1)
                o += p.numel()
            return out

        grad_shard = flat([p.grad for p in self.params])
        dist.all_reduce(grad_shard, op=dist.ReduceOp.SUM)
        grad_shard /= self.world
        p = flat(self.params).clone()
        self.t += 1
        b1, b2 = self.betas
        p.mul_(1 - self.lr * self.weight_decay)
        self.exp_avg.lerp_(grad_shard, 1 - b1)
        self.exp_avg_sq.mul_(b2).addcmul_(grad_shard, grad_shard, value=1 - b2)
        denom = (self.exp_avg_sq.sqrt() / (1 - b2 ** self.t) ** 0.5).add_(self.eps)
        p.addcdiv_(self.exp_avg, denom, value=-self.lr / (1 - b1 ** self.t))
        full = p
        o = 0
        for q in self.params:
            q.copy_(full[o:o + q.numel()].view_as(q))
            o += q.numel()

    def state_bytes(self):
        return sum(t.numel() * t.element_size() for t in (self.exp_avg, self.exp_avg_sq))

    def zero_grad(self):
        for p in self.params:
            p.grad = None
