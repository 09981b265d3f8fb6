"""11 ex3 states goals, not a recipe: correct designs other than the reference must score too
(the two wrong designs the freedom invites are in tests/test_checks_fsdp.py).

Two answers written differently from the notebook's reference pass every check of the harness
(`solutions_lib.dist.probes_fsdp`), as the notebook's text promises:

- `FlatShardedOptimizer`: one flat buffer per parameter group (not one piece per tensor), one
  reduce-scatter and one all-gather per group, and at stage 2 a bucket reduced once the whole
  group's gradients have arrived (not a reduce-scatter per tensor);
- `RecomputeFSDP`: no hooks and no storage trick; each unit runs inside an autograd Function that
  gathers its parameters, runs the unit without saving them, frees them, and in the backward
  gathers them again to recompute the unit (as activation checkpointing does) and returns the
  reduce-scattered gradient as the master shard's.
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

from solutions_lib.dist import probes_fsdp as kit

pytestmark = pytest.mark.xdist_group("dist_fsdp_kit")

SMALL = dict(world=2, dims=[4, 6, 2], seed=3)
BLOCKS = dict(world=2, depth=2, d=8, heads=2, seed=5)


class FlatShardedOptimizer:
    def __init__(self, params, optimizer_cls, stage=1, **kwargs):
        if not (isinstance(optimizer_cls, type) and issubclass(optimizer_cls, torch.optim.Optimizer)):
            raise ValueError("optimizer_cls must be an optimizer class")
        if stage not in (1, 2):
            raise ValueError("stage must be 1 or 2")
        groups = list(params)
        if not groups:
            raise ValueError("no parameters")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.n_ranks, rank, self.stage = dist.get_world_size(), dist.get_rank(), stage
        self.buckets, local = [], []
        for g in groups:
            ps = list(g["params"])
            total = sum(p.numel() for p in ps)
            s = -(-total // self.n_ranks)
            lo, hi = min(rank * s, total), min((rank + 1) * s, total)
            piece = torch.cat([p.detach().reshape(-1) for p in ps])[lo:hi].clone().requires_grad_(True)
            b = dict(params=ps, s=s, lo=lo, hi=hi, piece=piece, shard=None, arrived=0)
            self.buckets.append(b)
            local.append({**{k: v for k, v in g.items() if k != "params"}, "params": [piece]})
            if stage == 2:
                for p in ps:
                    p.register_post_accumulate_grad_hook(lambda p, b=b: self._arrived(b))
        self.optimizer = optimizer_cls(local, **kwargs)

    def _reduce(self, b):
        padded = torch.zeros(b["s"] * self.n_ranks)
        at = 0
        for p in b["params"]:
            if p.grad is not None:
                padded[at:at + p.numel()] = p.grad.reshape(-1)
            at += p.numel()
            p.grad = None
        out = torch.empty(b["s"])
        dist.reduce_scatter_tensor(out, padded)
        b["shard"] = out if b["shard"] is None else b["shard"] + out

    def _arrived(self, b):
        b["arrived"] += 1
        if b["arrived"] == len(b["params"]):
            b["arrived"] = 0
            self._reduce(b)

    @torch.no_grad()
    def step(self):
        for b in self.buckets:
            if self.stage == 1:
                self._reduce(b)
            b["piece"].grad = b["shard"][:b["hi"] - b["lo"]] / self.n_ranks
            b["shard"] = None
        self.optimizer.step()
        for b in self.buckets:
            mine = torch.zeros(b["s"])
            mine[:b["hi"] - b["lo"]] = b["piece"]
            full = torch.empty(b["s"] * self.n_ranks)
            dist.all_gather_into_tensor(full, mine)
            at = 0
            for p in b["params"]:
                p.copy_(full[at:at + p.numel()].view_as(p))
                at += p.numel()

    def zero_grad(self):
        for b in self.buckets:
            b["shard"], b["arrived"] = None, 0
            for p in b["params"]:
                p.grad = None

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, sd):
        self.optimizer.load_state_dict(sd)


class _Unit:
    def __init__(self, owner, mod, names):
        self.owner, self.forward = owner, mod.forward
        self.slots = [(m, a, p) for m in mod.modules() for a, p in list(m._parameters.items()) if p is not None]
        self.names = [names[id(p)] for *_, p in self.slots]
        self.shapes = [p.shape for *_, p in self.slots]
        self.sizes = [p.numel() for *_, p in self.slots]
        n_ranks = dist.get_world_size()
        self.s = -(-sum(self.sizes) // n_ranks)
        full = torch.zeros(self.s * n_ranks)
        full[:sum(self.sizes)] = torch.cat([p.detach().reshape(-1) for *_, p in self.slots])
        self.master = nn.Parameter(full[dist.get_rank() * self.s:][:self.s].clone())
        for m, a, p in self.slots:
            del m._parameters[a]
            p.data = torch.empty(0)
        self.flat = None
        mod.forward = lambda *xs: _GatheredUnit.apply(self, self.master, *xs)

    def gather(self, dtype):
        self.flat = torch.empty(self.s * dist.get_world_size(), dtype=dtype)
        self.owner.peak_param_bytes = max(self.owner.peak_param_bytes, self.owner.param_bytes())
        dist.all_gather_into_tensor(self.flat, self.master.detach().to(dtype))
        for (m, a, _), v, shape in zip(self.slots, self.flat[:sum(self.sizes)].split(self.sizes), self.shapes):
            setattr(m, a, v.view(shape))

    def free(self):
        for m, a, _ in self.slots:
            setattr(m, a, None)
        self.flat = None


class _GatheredUnit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, unit, master, *xs):
        unit.gather(unit.owner.dtype)
        out = unit.forward(*xs)
        unit.free()
        ctx.unit = unit
        ctx.save_for_backward(*xs)
        return out

    @staticmethod
    def backward(ctx, grad):
        unit = ctx.unit
        unit.gather(unit.owner.dtype)
        xs = [x.detach().requires_grad_(x.requires_grad) for x in ctx.saved_tensors]
        with torch.enable_grad():      # a Function's backward runs without grad mode
            unit.flat.requires_grad_(True)
            for (m, a, _), v, shape in zip(unit.slots, unit.flat[:sum(unit.sizes)].split(unit.sizes), unit.shapes):
                setattr(m, a, v.view(shape))
            torch.autograd.backward(unit.forward(*xs), grad)
        shard = torch.empty(unit.s, dtype=unit.flat.dtype)
        dist.reduce_scatter_tensor(shard, unit.flat.grad)
        unit.free()
        return (None, shard.float() / dist.get_world_size(), *[x.grad for x in xs])


class RecomputeFSDP(nn.Module):
    def __init__(self, module, units, compute_dtype=None):
        super().__init__()
        self.dtype = compute_dtype or torch.float32
        if self.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            raise ValueError("compute_dtype")
        names = {id(p): n for n, p in module.named_parameters()}
        covered = {id(p) for u in units for p in u.parameters()}
        if any(id(p) not in covered for p in module.parameters() if p.requires_grad):
            raise ValueError("a parameter outside every unit")
        self.module = module
        self.peak_param_bytes = 0
        self.units = [_Unit(self, mod, names) for mod in units]
        self.masters = nn.ParameterList([u.master for u in self.units])
        self.peak_param_bytes = self.param_bytes()

    def forward(self, x):
        return self.module(x.to(self.dtype))

    def param_bytes(self):
        return sum(4 * u.s + (0 if u.flat is None else u.flat.untyped_storage().nbytes()) for u in self.units)

    @torch.no_grad()
    def full_state_dict(self):
        out = {}
        for u in self.units:
            full = torch.empty(u.s * dist.get_world_size())
            dist.all_gather_into_tensor(full, u.master.detach())
            for name, v, shape in zip(u.names, full[:sum(u.sizes)].split(u.sizes), u.shapes):
                out[name] = v.view(shape).clone()
        return out


def test_a_flat_buffer_per_group_passes_every_sharded_check():
    kit.check_sharded_step(FlatShardedOptimizer, "AdamW", steps=2, **SMALL)
    kit.check_sharded_step(FlatShardedOptimizer, "RMSprop", world=3, dims=[5, 7, 3], seed=1, steps=2)
    kit.check_sharded_state(FlatShardedOptimizer, "Adagrad", **SMALL)
    kit.check_sharded_resume(FlatShardedOptimizer, "SGD-momentum", steps=3, cut=1, **SMALL)
    kit.check_sharded_stage2(FlatShardedOptimizer, "AdamW", steps=2, **SMALL)


def test_a_recomputing_fsdp_without_hooks_passes_every_fsdp_check():
    kit.check_fsdp_training(RecomputeFSDP, steps=2, **BLOCKS)
    kit.check_fsdp_memory(RecomputeFSDP, steps=2, **BLOCKS)
    kit.check_fsdp_mixed_precision(RecomputeFSDP, steps=2, **BLOCKS)

