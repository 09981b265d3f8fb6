# loses: fsdp_memory_tests
# why: the one-unit FSDP of assignment 10 in per-unit clothes: every unit is gathered before the model's forward and kept until its gradient is reduce-scattered, so the whole model is gathered at the peak, autograd holds every unit between forward and backward, and each unit is all-gathered once per step, not twice
class MyFSDP(nn.Module):
    def __init__(self, module, units, compute_dtype=None):
        super().__init__()
        compute_dtype = torch.float32 if compute_dtype is None else compute_dtype
        if compute_dtype not in (torch.float32, torch.bfloat16, torch.float16):
            raise ValueError(f"compute_dtype must be None, float32, bfloat16 or float16, got {compute_dtype!r}")
        units = list(units)
        if not units:
            raise ValueError("give at least one unit")
        in_units = {id(p) for u in units for p in u.parameters()}
        outside = [n for n, p in module.named_parameters() if p.requires_grad and id(p) not in in_units]
        if outside:
            raise ValueError(f"parameters outside every unit: {outside}")
        names = {id(p): n for n, p in module.named_parameters()}
        self.module, self.dtype = module, compute_dtype
        self.world, self.rank = dist.get_world_size(), dist.get_rank()

        # The life of a unit u (a dict) in one step: gathered before its forward, its storage freed
        # after it, gathered again when its output's gradient arrives, its gradient reduce-scattered
        # into the master shard once complete, then freed.
        def gather(u):
            flat = u["flat"]
            flat.untyped_storage().resize_(flat.numel() * flat.element_size())
            self.peak_param_bytes = max(self.peak_param_bytes, self.param_bytes())
            dist.all_gather_into_tensor(flat.data, u["master"].detach().to(self.dtype))

        def pre_forward(u):
            u["flat"] = torch.empty(u["shard"] * self.world, dtype=self.dtype)
            gather(u)
            if torch.is_grad_enabled():
                u["flat"].requires_grad_(True)
                u["flat"].register_post_accumulate_grad_hook(lambda t, u=u: post_backward(u))
            views = u["flat"][:u["numel"]].split(u["sizes"])
            for (m, a, _), v, shape in zip(u["slots"], views, u["shapes"]):
                setattr(m, a, v.view(shape))

        def post_forward(u, out):
            if isinstance(out, torch.Tensor) and out.requires_grad:
                out.register_hook(lambda g, u=u: pre_backward(u))
                u["flat"].untyped_storage().resize_(0)
            else:
                u["flat"] = None
            for m, a, _ in u["slots"]:
                setattr(m, a, torch.empty(0))

        def pre_backward(u):
            if u["flat"] is not None and u["flat"].untyped_storage().nbytes() == 0:
                gather(u)

        def post_backward(u):
            flat = u["flat"]
            out = torch.empty(u["shard"], dtype=flat.grad.dtype)
            dist.reduce_scatter_tensor(out, flat.grad, op=dist.ReduceOp.SUM)
            g = out.float() / self.world
            m = u["master"]
            m.grad = g if m.grad is None else m.grad + g
            flat.grad = None
            flat.untyped_storage().resize_(0)
            u["flat"] = None

        self.units, masters = [], []
        for mod in units:
            slots = [(m, a, p) for m in mod.modules() for a, p in list(m._parameters.items())
                     if p is not None and p.requires_grad]
            sizes = [p.numel() for *_, p in slots]
            n = sum(sizes)
            s = -(-n // self.world)
            flat = torch.zeros(s * self.world)
            flat[:n] = torch.cat([p.detach().reshape(-1) for *_, p in slots])
            masters.append(nn.Parameter(flat[self.rank * s:(self.rank + 1) * s].clone()))
            u = dict(slots=slots, names=[names[id(p)] for *_, p in slots], shapes=[p.shape for *_, p in slots],
                     sizes=sizes, numel=n, shard=s, master=masters[-1], flat=None)
            for m, a, p in slots:
                del m._parameters[a]
                p.data = torch.empty(0)
                setattr(m, a, torch.empty(0))
            self.units.append(u)
        self._pre_forward = pre_forward
        self.masters = nn.ParameterList(masters)
        self.peak_param_bytes = self.param_bytes()

    def forward(self, *args):
        args = [a.to(self.dtype) if torch.is_tensor(a) and a.is_floating_point() else a for a in args]
        for u in self.units:           # the whole model gathered before the forward, as one unit
            self._pre_forward(u)
        return self.module(*args)

    def param_bytes(self):
        held = sum(u["master"].numel() * u["master"].element_size() for u in self.units)
        return held + sum(u["flat"].untyped_storage().nbytes() for u in self.units if u["flat"] is not None)

    @torch.no_grad()
    def full_state_dict(self):
        out = {}
        for u in self.units:
            full = torch.empty(u["shard"] * self.world)
            dist.all_gather_into_tensor(full, u["master"].detach())
            for name, piece, shape in zip(u["names"], full[:u["numel"]].split(u["sizes"]), u["shapes"]):
                out[name] = piece.view(shape).clone()
        return out
