# loses: fsdp_memory_tests
# why: finish_backward keeps the gathered full vector (as a spare for the next forward) and param_bytes() counts only the shard
class MyFSDP(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
        self.slots, self.shapes, self.offsets = [], [], []
        params, o = [], 0
        for mod_name, mod in module.named_modules():
            for name, p in list(mod._parameters.items()):
                if p is not None and p.requires_grad:
                    self.slots.append((mod, name))
                    self.shapes.append(p.shape)
                    self.offsets.append(o)
                    params.append(p)
                    o += p.numel()
        if not params:
            raise ValueError("the module has no trainable parameters")
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.numel = o
        self.size = -(-o // self.world)
        self.padded = self.size * self.world
        with torch.no_grad():
            flat = torch.zeros(self.padded)
            for off, p in zip(self.offsets, params):
                flat[off:off + p.numel()] = p.reshape(-1)
            self.shard = nn.Parameter(flat[self.rank * self.size:(self.rank + 1) * self.size].clone())
            for p in params:
                p.data = torch.empty(0)
        for mod, name in self.slots:
            del mod._parameters[name]
        self.full = None
        for mod, name in self.slots:          # a plain, empty tensor until the next forward
            setattr(mod, name, torch.empty(0))

    def forward(self, *args, **kwargs):
        full = torch.empty(self.padded)
        dist.all_gather_into_tensor(full, self.shard.detach())
        self.full = full.requires_grad_(True)
        for (mod, name), off, shape in zip(self.slots, self.offsets, self.shapes):
            setattr(mod, name, self.full[off:off + shape.numel()].view(shape))
        return self.module(*args, **kwargs)

    def finish_backward(self):
        grad = torch.empty(self.size)
        dist.reduce_scatter_tensor(grad, self.full.grad, op=dist.ReduceOp.SUM)
        grad /= self.world
        if self.shard.grad is None:
            self.shard.grad = grad
        else:
            self.shard.grad += grad
        self.spare = self.full.detach()        # reused? never: the next forward allocates anew
        self.full = None
        for mod, name in self.slots:
            setattr(mod, name, torch.empty(0))

    def param_bytes(self):
        held = [self.shard] + ([self.full] if self.full is not None else [])
        return sum(t.numel() * t.element_size() for t in held)
