"""FSDP by hand: one flat, sharded unit for a whole module (ZeRO stage 3 for parameters).

Every rank keeps only its shard of the flat fp32 parameter vector (P entries padded with zeros
to P_pad = N ceil(P / N), S = P_pad / N per rank), as one trainable ``nn.Parameter``
(`FlatShardFSDP.flat_shard`); the module's own parameters are removed and their storage freed.

* forward: ``all_gather_into_tensor`` rebuilds the full flat vector (a leaf that requires grad);
  every module parameter becomes a view of it, then the module runs as usual;
* backward: the views send their gradients into the full vector's ``.grad``; a
  post-accumulate-grad hook on that vector ``reduce_scatter_tensor``-s it (SUM, then / N: the
  average gradient of my shard) into ``flat_shard.grad`` and frees the full vector;
* step: any optimizer on ``fsdp.parameters()`` (only the shard) keeps state for S entries.

Between steps a rank holds S parameters, S gradients and the optimizer state of S entries:
1/N of each, the stage-3 row of Rajbhandari et al. (SC 2020), which Zhao et al. ("PyTorch
FSDP: Experiences on Scaling Fully Sharded Data Parallel", VLDB 2023) build in PyTorch with
flat parameters per unit. The full parameters exist only from forward to the end of backward
(we do not re-shard after forward; torch's FSDP does by default and gathers again in backward,
trading one more all-gather for the memory of the full parameters during backward).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from .zero import _quiet, flat_shard_layout

__all__ = ["FSDP", "FlatShardFSDP", "fsdp_comm_bytes_per_step"]


def fsdp_comm_bytes_per_step(n_params, world_size, bytes_per_element=4, reshard_after_forward=False) -> dict:
    """Payload bytes (as `CommCounter` counts them) of one FSDP step with one flat unit.

    all_gather_into_tensor: P_pad e per gather, one before forward, plus one in backward when
    the unit re-shards after forward; reduce_scatter_tensor: P_pad e (the flat gradient).
    P_pad = N ceil(P / N). With k units, sum the formula over the units.
    """
    padded, *_ = flat_shard_layout(n_params, world_size)
    if isinstance(bytes_per_element, bool) or not isinstance(bytes_per_element, int) or bytes_per_element < 1:
        raise ValueError(f"bytes_per_element must be an integer >= 1, got {bytes_per_element!r}")
    gathers = 2 if reshard_after_forward else 1
    return {"all_gather_into_tensor": gathers * padded * bytes_per_element,
            "reduce_scatter_tensor": padded * bytes_per_element}


def _storage_bytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        s = t.untyped_storage()
        if s.data_ptr() not in seen and s.nbytes() > 0:
            seen.add(s.data_ptr())
            total += s.nbytes()
    return total


class FlatShardFSDP(nn.Module):
    """Wrap `module` so that each rank stores 1/N of its trainable parameters (one flat unit).

        fsdp = FlatShardFSDP(model)                # on every rank, same initial weights
        opt = torch.optim.AdamW(fsdp.parameters())  # sees only the shard
        loss = loss_fn(fsdp(x_my_micro_batch)); loss.backward(); opt.step(); opt.zero_grad()

    The gradient that arrives in ``flat_shard.grad`` is the average over ranks (several
    backward passes before a step add up, as in plain torch). With 2 ranks and one micro-batch
    each, losses and parameters are bitwise those of one process that accumulates
    loss / 2 over the same micro-batches and steps the same optimizer with foreach=False.
    Parameters must be fp32 on one device; all ranks must start from the same weights.
    """

    def __init__(self, module: nn.Module, *, world_size: int | None = None):
        super().__init__()
        if not isinstance(module, nn.Module):
            raise ValueError(f"FlatShardFSDP wraps an nn.Module, got {type(module).__name__}")
        slots, params, seen = [], [], {}
        for mod_name, mod in module.named_modules():
            for name, p in list(mod._parameters.items()):
                if p is None or not p.requires_grad:
                    continue
                if id(p) not in seen:            # a tied weight is stored once
                    seen[id(p)] = len(params)
                    params.append((f"{mod_name}.{name}" if mod_name else name, p))
                slots.append((mod, name, seen[id(p)]))
        if not params:
            raise ValueError("the module has no trainable parameters (requires_grad=True): nothing to shard")
        if any(p.dtype != torch.float32 for _, p in params):
            raise ValueError("FlatShardFSDP keeps one flat fp32 vector; cast the module to float32 first")
        if len({p.device for _, p in params}) != 1:
            raise ValueError("all parameters must live on one device")
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("FlatShardFSDP needs an initialised process group (run it under launch)")
        n = dist.get_world_size()
        if world_size is not None and world_size != n:
            raise ValueError(f"world_size={world_size} but the process group has {n} ranks")
        self.world_size, self.rank = n, dist.get_rank()
        self.names = [name for name, _ in params]
        self.shapes = [p.shape for _, p in params]
        self.offsets, o = [], 0
        for _, p in params:
            self.offsets.append(o)
            o += p.numel()
        self.numel = o
        self.padded, self.shard, self.start, self.stop = flat_shard_layout(o, n, self.rank)
        with torch.no_grad():
            flat = torch.zeros(self.padded, device=params[0][1].device)
            for off, (_, p) in zip(self.offsets, params):
                flat[off:off + p.numel()].copy_(p.reshape(-1))
            shard = flat[self.start:self.stop].clone()
            del flat
            for _, p in params:                  # free the full parameters, even if held elsewhere
                p.data = torch.empty(0, device=p.device)
        self.flat_shard = nn.Parameter(shard)
        self._slots = slots
        for mod, name, _ in slots:
            del mod._parameters[name]
        self.module = module
        self._full: torch.Tensor | None = None
        self.gathers = 0          # how often the forward all-gathered
        self.reduce_scatters = 0  # how often the backward hook reduce-scattered
        self._free()

    # -- the full parameters live only from forward to the end of backward
    def _set_views(self, full: torch.Tensor | None) -> None:
        empty = torch.empty(0, device=self.flat_shard.device)
        for mod, name, i in self._slots:
            if full is None:
                setattr(mod, name, empty)
            else:
                off = self.offsets[i]
                size = self.shapes[i].numel()
                setattr(mod, name, full[off:off + size].view(self.shapes[i]))

    def _free(self) -> None:
        self._full = None
        self._set_views(None)

    def _gather(self) -> torch.Tensor:
        full = torch.empty(self.padded, device=self.flat_shard.device)
        _quiet(dist.all_gather_into_tensor, full, self.flat_shard.detach())
        self.gathers += 1
        return full

    def _after_backward(self, full: torch.Tensor) -> None:
        grad = torch.empty(self.shard, device=full.device)
        _quiet(dist.reduce_scatter_tensor, grad, full.grad, op=dist.ReduceOp.SUM)
        grad.div_(self.world_size)
        self.reduce_scatters += 1
        if self.flat_shard.grad is None:
            self.flat_shard.grad = grad
        else:
            self.flat_shard.grad.add_(grad)
        full.grad = None
        if self._full is full:
            self._free()

    def forward(self, *args, **kwargs):
        full = self._gather()
        if torch.is_grad_enabled():
            full.requires_grad_(True)
            full.register_post_accumulate_grad_hook(self._after_backward)
        self._full = full
        self._set_views(full)
        out = self.module(*args, **kwargs)
        if not torch.is_grad_enabled():
            self._free()
        return out

    # -- inspection
    def param_bytes(self) -> int:
        """Bytes of parameter storage this rank holds now (the shard, plus the full vector
        between forward and backward), measured from the tensors themselves."""
        held = [self.flat_shard] + [getattr(mod, name) for mod, name, _ in self._slots]
        return _storage_bytes(held + ([self._full] if self._full is not None else []))

    def grad_bytes(self) -> int:
        """Bytes of gradient storage this rank holds (the shard's gradient)."""
        return _storage_bytes([self.flat_shard.grad])

    @torch.no_grad()
    def full_parameters(self) -> dict[str, torch.Tensor]:
        """{name: full tensor} gathered from all ranks (a collective: call it on every rank)."""
        full = torch.empty(self.padded, device=self.flat_shard.device)
        _quiet(dist.all_gather_into_tensor, full, self.flat_shard.detach())
        return {name: full[off:off + shape.numel()].view(shape).clone()
                for name, off, shape in zip(self.names, self.offsets, self.shapes)}


# ---------------------------------------------------------------- per-layer FSDP (units, prefetch, mixed precision)

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check_dtype(name, dt):
    if dt is None:
        return None
    if dt not in _FLOAT_DTYPES:
        raise ValueError(f"{name} must be None, torch.float32, torch.float16 or torch.bfloat16, got {dt!r}")
    return dt


class _Unit:
    """One FSDP unit: a sub-module whose trainable parameters form one flat, sharded vector."""

    def __init__(self, index, name, module, params, slots, world_size, rank):
        self.index, self.name, self.module = index, name, module
        self.params = params                   # [(name, original parameter)] in flat order
        self.slots = slots                     # [(owner module, attribute, index into params)]
        self.shapes = [p.shape for _, p in params]
        self.sizes = [p.numel() for _, p in params]
        self.numel = sum(self.sizes)
        self.padded, self.shard, self.start, self.stop = flat_shard_layout(self.numel, world_size, rank)
        self.offsets, o = [], 0
        for s in self.sizes:
            self.offsets.append(o)
            o += s
        self.master: nn.Parameter | None = None   # fp32 shard, set by FSDP
        self.full: torch.Tensor | None = None     # compute-dtype flat leaf (storage may be freed)
        self.work = None                           # pending async all-gather (prefetch)
        self.needs_views = False                   # a fresh `full` whose views are not made yet
        self.views: list | None = None
        self.bw_done = False                       # the pre-backward re-gather happened this backward

    def gathered(self) -> bool:
        return self.full is not None and self.full.untyped_storage().nbytes() > 0


class FSDP(nn.Module):
    """Fully sharded data parallelism with one flat shard per unit (per layer), by hand.

        fsdp = FSDP(model, compute_dtype=torch.bfloat16)   # every rank, same initial weights
        opt = torch.optim.AdamW(fsdp.parameters())           # the fp32 master shards only
        loss = loss_fn(fsdp(x_my_micro_batch)); loss.backward(); opt.step(); opt.zero_grad()

    Units: each top-level child of `module` (the children of an ``nn.ModuleList`` /
    ``nn.ModuleDict`` child count one by one, so ``model.blocks[i]`` is a unit), or
    ``units=`` a module class (tuple of classes: every outermost instance is a unit) or a list
    of sub-module names. Parameters outside every unit, or shared by two units (tied weights),
    form the root unit, gathered for the whole forward and backward (as torch's root).
    Each unit u of P_u trainable entries keeps its fp32 master shard of S_u = ceil(P_u / N)
    entries (`parameters()` yields only these: the optimizer state is 1/N too).

    Life of a unit in one step (Zhao et al., "PyTorch FSDP", VLDB 2023, section 3; ZeRO stage 3
    of Rajbhandari et al., SC 2020):

    * pre-forward hook: wait for its prefetched all-gather (or all-gather now) of the shard cast
      to `compute_dtype`; the module's parameters become views of the gathered flat leaf; with
      `prefetch`, start the asynchronous all-gather of the next unit (the order of the previous
      forward) so it overlaps this unit's compute; floating inputs are cast to `compute_dtype`;
    * post-forward hook: with `reshard_after_forward`, free the gathered storage (the autograd
      graph keeps views of it, their storage resized to 0 bytes);
    * pre-backward (a hook on the gradient of the unit's output): all-gather again into the
      same storage; with `prefetch`, start the gather of the unit that ran before it;
    * post-accumulate-grad hook on the flat leaf (it fires once, when every gradient of the
      unit is in): cast the flat gradient to `reduce_dtype`, asynchronous ``reduce_scatter``
      (SUM), free the gathered storage; at the end of backward (an autograd engine callback)
      wait, cast to fp32, divide by N and add into the master shard's ``.grad``.

    Mixed precision: `compute_dtype` (None: fp32) is the dtype of the gathered parameters, of
    the all-gather and of the forward/backward compute; `reduce_dtype` (None: the compute
    dtype) is the dtype of the reduce-scatter; masters, gradients of the shards and the
    optimizer stay fp32. Communication per step (`comm_per_step`, as `CommCounter` counts it):
    per unit, one all-gather of P_pad,u entries of the compute dtype before forward plus one in
    backward when it re-shards (not the root), and one reduce-scatter of P_pad,u entries of
    the reduce dtype. Peak parameter bytes per rank (`peak_param_bytes`): 4 sum_u S_u (the
    masters) + the root + the gathered units alive at once, the largest unit (two with
    prefetch: this one and the next), against DDP's 4 P.

    A unit's parameters exist only inside its own forward: a module that reads another unit's
    weight (the course GPT's tied output layer, ``F.linear(x, self.tok.weight)``) needs that
    weight in the root: ``FSDP(gpt, units=Block)`` (the blocks are units, the rest the root).
    Limits: each unit runs once per forward; one backward per forward (no retain_graph reuse);
    parameters fp32 on one device; all ranks must run the same units in the same order.
    """

    def __init__(self, module: nn.Module, compute_dtype=None, reshard_after_forward: bool = True,
                 reduce_dtype=None, prefetch: bool = True, *, units=None, world_size: int | None = None):
        super().__init__()
        if not isinstance(module, nn.Module):
            raise ValueError(f"FSDP wraps an nn.Module, got {type(module).__name__}")
        self.compute_dtype = _check_dtype("compute_dtype", compute_dtype) or torch.float32
        self.reduce_dtype = _check_dtype("reduce_dtype", reduce_dtype) or self.compute_dtype
        for name, flag in (("reshard_after_forward", reshard_after_forward), ("prefetch", prefetch)):
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be True or False, got {flag!r}")
        self.reshard_after_forward, self.prefetch = reshard_after_forward, prefetch
        trainable = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not trainable:
            raise ValueError("the module has no trainable parameters (requires_grad=True): nothing to shard")
        if any(p.dtype != torch.float32 for _, p in trainable):
            raise ValueError("FSDP keeps fp32 master shards; cast the module to float32 first "
                             "(use compute_dtype for bf16/fp16 compute)")
        if len({p.device for _, p in trainable}) != 1:
            raise ValueError("all parameters must live on one device")
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("FSDP needs an initialised process group (run it under launch)")
        n = dist.get_world_size()
        if world_size is not None and world_size != n:
            raise ValueError(f"world_size={world_size} but the process group has {n} ranks")
        self.world_size, self.rank = n, dist.get_rank()
        device = trainable[0][1].device

        picked = self._pick_units(module, units)
        # owner of every parameter slot: the unit whose sub-tree holds the owning module, else root
        owner_of_module = {}
        for ui, (_, sub) in enumerate(picked):
            for m in sub.modules():
                owner_of_module.setdefault(id(m), ui)
        slots_by_param, owners, order = {}, {}, []
        self._names: list[tuple[str, int]] = []     # (full name, id(param)) for every slot, tied too
        for mod_name, mod in module.named_modules():
            for attr, p in list(mod._parameters.items()):
                if p is None or not p.requires_grad:
                    continue
                if id(p) not in slots_by_param:
                    slots_by_param[id(p)] = []
                    order.append(p)
                slots_by_param[id(p)].append((mod, attr))
                owners.setdefault(id(p), set()).add(owner_of_module.get(id(mod), -1))
                self._names.append((f"{mod_name}.{attr}" if mod_name else attr, id(p)))
        name_of = {}
        for nm, pid in self._names:
            name_of.setdefault(pid, nm)
        members = {ui: [] for ui in range(-1, len(picked))}
        for p in order:
            o = owners[id(p)]
            members[next(iter(o)) if len(o) == 1 else -1].append(p)
        self.units: list[_Unit] = []
        self.root: _Unit | None = None
        self._where: dict[int, tuple[_Unit, int]] = {}
        for ui in list(range(len(picked))) + [-1]:
            ps = members[ui]
            if not ps:
                continue
            name, sub = picked[ui] if ui >= 0 else ("", module)
            slots = [(m, a, i) for i, p in enumerate(ps) for m, a in slots_by_param[id(p)]]
            unit = _Unit(len(self.units) if ui >= 0 else -1, name, sub, [(name_of[id(p)], p) for p in ps],
                         slots, n, self.rank)
            for i, p in enumerate(ps):
                self._where[id(p)] = (unit, i)
            if ui >= 0:
                self.units.append(unit)
            else:
                self.root = unit
        if not self.units and self.root is None:
            raise ValueError("no unit holds a trainable parameter")

        masters = []
        with torch.no_grad():
            for unit in self._all_units():
                flat = torch.zeros(unit.padded, device=device)
                for off, (_, p) in zip(unit.offsets, unit.params):
                    flat[off:off + p.numel()].copy_(p.reshape(-1))
                unit.master = nn.Parameter(flat[unit.start:unit.stop].clone())
                masters.append(unit.master)
                del flat
            for unit in self._all_units():
                for _, p in unit.params:        # free the full parameters, even if held elsewhere
                    p.data = torch.empty(0, device=device)
                for m, a, _ in unit.slots:
                    if a in m._parameters:
                        del m._parameters[a]
        self.flat_shards = nn.ParameterList(masters)
        self.module = module
        self._device = device
        self._empty = torch.empty(0, device=device, dtype=self.compute_dtype)
        for unit in self._all_units():
            self._set_views(unit, None)
        self._handles = []
        for unit in self.units:
            self._handles.append(unit.module.register_forward_pre_hook(
                self._make_pre_forward(unit), with_kwargs=True))
            self._handles.append(unit.module.register_forward_hook(self._make_post_forward(unit)))
        self._plan = [u.index for u in self.units]   # forward order used for prefetch
        self._fwd_order: list[int] = []
        self._pending_rs: list = []
        self._final_queued = False
        self.peak_param_bytes = 0
        self.gathers = 0
        self.reduce_scatters = 0
        self.reset_peak()

    # -- construction helpers
    @staticmethod
    def _pick_units(module, units):
        if units is None:
            out = []

            def expand(prefix, m):
                for name, c in m.named_children():
                    if isinstance(c, (nn.ModuleList, nn.ModuleDict)):
                        expand(f"{prefix}{name}.", c)
                    else:
                        out.append((f"{prefix}{name}", c))
            expand("", module)
            return out
        if isinstance(units, type) or (isinstance(units, tuple) and units and all(isinstance(u, type) for u in units)):
            out = []
            for name, m in module.named_modules():
                if m is not module and isinstance(m, units) and not any(name.startswith(o + ".") for o, _ in out):
                    out.append((name, m))
            if not out:
                raise ValueError(f"no sub-module of the wrapped module is an instance of {units!r}")
            return out
        if isinstance(units, str):
            raise ValueError("units must be None, a module class (or tuple of classes) or a list of "
                             f"sub-module names, got the string {units!r}")
        try:
            names = list(units)
        except TypeError:
            raise ValueError(f"units must be None, a module class or a list of sub-module names, got {units!r}") from None
        mods = dict(module.named_modules())
        out = []
        for name in names:
            if not isinstance(name, str) or not name or name not in mods:
                raise ValueError(f"units: {name!r} is not the name of a sub-module")
            out.append((name, mods[name]))
        for a, _ in out:
            for b, _ in out:
                if a != b and b.startswith(a + "."):
                    raise ValueError(f"units {a!r} and {b!r} nest: units must be disjoint")
        if len({a for a, _ in out}) != len(out):
            raise ValueError("units: a name appears twice")
        return out

    def _all_units(self):
        return self.units + ([self.root] if self.root is not None else [])

    # -- gathering and freeing
    def _set_views(self, unit, views):
        for m, a, i in unit.slots:
            setattr(m, a, self._empty if views is None else views[i])

    def _alive_bytes(self) -> int:
        total = sum(u.master.numel() * u.master.element_size() for u in self._all_units())
        for u in self._all_units():
            if u.full is not None:
                total += u.full.untyped_storage().nbytes()
        return total

    def _start_gather(self, unit, async_op):
        """Allocate (or re-grow) the gathered storage and all-gather the compute-dtype shard into it."""
        if unit.full is None:
            unit.full = torch.empty(unit.padded, device=self._device, dtype=self.compute_dtype)
            unit.needs_views = True
        else:
            unit.full.untyped_storage().resize_(unit.padded * unit.full.element_size())
        self.peak_param_bytes = max(self.peak_param_bytes, self._alive_bytes())
        src = unit.master.detach().to(self.compute_dtype)
        # `.data`: the write must not bump the version of the leaf that autograd saved views of
        work = _quiet(dist.all_gather_into_tensor, unit.full.data, src, async_op=async_op)
        self.gathers += 1
        if async_op:
            unit.work = work

    def _unshard(self, unit):
        if unit.work is not None:
            unit.work.wait()
            unit.work = None
        elif not unit.gathered():
            self._start_gather(unit, async_op=False)
        if unit.needs_views:
            unit.needs_views = False
            full = unit.full
            if torch.is_grad_enabled():
                full.requires_grad_(True)
                full.register_post_accumulate_grad_hook(lambda t, unit=unit: self._post_backward(unit, t))
            unit.views = [v.view(s) for v, s in zip(full[:unit.numel].split(unit.sizes), unit.shapes)]
        self._set_views(unit, unit.views)

    def _reshard(self, unit, drop=False):
        if unit.work is not None:
            unit.work.wait()
            unit.work = None
        if unit.full is not None:
            unit.full.untyped_storage().resize_(0)
        self._set_views(unit, None)
        if drop:
            unit.full, unit.views, unit.needs_views = None, None, False

    def _prefetch(self, unit):
        if self.prefetch and unit.work is None and not unit.gathered():
            self._start_gather(unit, async_op=True)

    # -- hooks
    def _cast(self, tree):
        if self.compute_dtype == torch.float32:
            return tree
        from torch.utils._pytree import tree_map
        return tree_map(lambda t: t.to(self.compute_dtype)
                        if isinstance(t, torch.Tensor) and t.is_floating_point() else t, tree)

    def _make_pre_forward(self, unit):
        def hook(module, args, kwargs):
            self._fwd_order.append(unit.index)
            self._unshard(unit)
            if self.prefetch:
                pos = self._plan.index(unit.index) if unit.index in self._plan else -1
                if 0 <= pos < len(self._plan) - 1:
                    nxt = self.units[self._plan[pos + 1]]
                    if nxt.index not in self._fwd_order:
                        self._prefetch(nxt)
            return self._cast(args), self._cast(kwargs)
        return hook

    def _make_post_forward(self, unit):
        def hook(module, args, output):
            if not torch.is_grad_enabled():
                self._reshard(unit, drop=True)
                return output
            from torch.utils._pytree import tree_flatten
            unit.bw_done = False
            for t in tree_flatten(output)[0]:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(lambda g, unit=unit: self._pre_backward(unit))
            if self.reshard_after_forward:
                self._reshard(unit)
            return output
        return hook

    def _queue_final(self):
        if not self._final_queued:
            self._final_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._finish_backward)

    def _pre_backward(self, unit):
        self._queue_final()
        if unit.bw_done or unit.full is None:
            return None
        unit.bw_done = True
        if not unit.gathered() or unit.work is not None:
            self._unshard_for_backward(unit)
        if self.prefetch and unit.index in self._fwd_order:
            pos = self._fwd_order.index(unit.index)
            if pos > 0:
                prev = self.units[self._fwd_order[pos - 1]]
                if prev.full is not None and not prev.bw_done:
                    self._prefetch(prev)
        return None

    def _unshard_for_backward(self, unit):
        if unit.work is not None:
            unit.work.wait()
            unit.work = None
        elif not unit.gathered():
            self._start_gather(unit, async_op=False)

    def _post_backward(self, unit, full):
        self._queue_final()
        grad = full.grad
        full.grad = None
        if grad.dtype != self.reduce_dtype:
            grad = grad.to(self.reduce_dtype)
        out = torch.empty(unit.shard, device=grad.device, dtype=self.reduce_dtype)
        work = _quiet(dist.reduce_scatter_tensor, out, grad.contiguous(), op=dist.ReduceOp.SUM, async_op=True)
        self.reduce_scatters += 1
        self._pending_rs.append((unit, work, out, grad))
        unit.bw_done = True
        self._reshard(unit, drop=True)

    def _finish_backward(self):
        for unit, work, out, _ in self._pending_rs:
            work.wait()
            g = out.to(torch.float32).div_(self.world_size)
            if unit.master.grad is None:
                unit.master.grad = g
            else:
                unit.master.grad.add_(g)
        self._pending_rs = []
        for unit in self._all_units():          # prefetched or gathered but never used in backward
            if unit.full is not None:
                self._reshard(unit, drop=True)
        if self._fwd_order:
            self._plan = list(self._fwd_order)
        self._final_queued = False

    def forward(self, *args, **kwargs):
        if not self._final_queued:               # a forward that never saw its backward: drop it
            for u in self._all_units():
                if u.full is not None:
                    self._reshard(u, drop=True)
        self._fwd_order = []
        root = self.root
        if root is not None:
            self._unshard(root)
        try:
            out = self.module(*self._cast(args), **self._cast(kwargs))
        finally:
            for u in self.units:                 # a prefetch that no unit consumed
                if u.work is not None and u.index not in self._fwd_order:
                    self._reshard(u, drop=True)
        if not torch.is_grad_enabled():
            for u in self._all_units():
                self._reshard(u, drop=True)
        elif root is not None:
            self._set_views(root, None)          # the graph holds the views until backward
        return out

    # -- inspection and state
    def reset_peak(self) -> None:
        """Start a new peak measurement (`peak_param_bytes`) from the bytes alive now."""
        self.peak_param_bytes = self._alive_bytes()

    def param_bytes(self) -> int:
        """Bytes of parameter storage this rank holds now: the fp32 master shards plus every
        gathered flat buffer whose storage is allocated (measured from the storages)."""
        return self._alive_bytes()

    def unit_numels(self) -> dict[str, int]:
        """{unit name ('' for the root): trainable entries P_u} (unpadded)."""
        return {u.name: u.numel for u in self._all_units()}

    def comm_per_step(self) -> dict[str, tuple[int, int]]:
        """{op: (calls, payload bytes)} of one forward + backward, the format of
        `CommCounter.summary()`: `fsdp_comm_bytes_per_step` summed over the units, the
        all-gathers in the compute dtype (twice for a unit that re-shards; the root never
        does), the reduce-scatters in the reduce dtype."""
        e_c = torch.empty(0, dtype=self.compute_dtype).element_size()
        e_r = torch.empty(0, dtype=self.reduce_dtype).element_size()
        calls = {"all_gather_into_tensor": 0, "reduce_scatter_tensor": 0}
        nbytes = dict.fromkeys(calls, 0)
        for u in self._all_units():
            again = self.reshard_after_forward and u is not self.root
            nbytes["all_gather_into_tensor"] += fsdp_comm_bytes_per_step(
                u.numel, self.world_size, e_c, again)["all_gather_into_tensor"]
            nbytes["reduce_scatter_tensor"] += fsdp_comm_bytes_per_step(
                u.numel, self.world_size, e_r)["reduce_scatter_tensor"]
            calls["all_gather_into_tensor"] += 2 if again else 1
            calls["reduce_scatter_tensor"] += 1
        return {op: (calls[op], nbytes[op]) for op in calls}

    @torch.no_grad()
    def full_state_dict(self, rank0_only: bool = False) -> dict[str, torch.Tensor]:
        """The wrapped module's ``state_dict()`` with full fp32 parameters, by their original
        names (tied names each present) plus the buffers: a collective (one fp32 all-gather
        per unit), call it on every rank. With `rank0_only`, ranks other than 0 get {}."""
        if not isinstance(rank0_only, bool):
            raise ValueError(f"rank0_only must be True or False, got {rank0_only!r}")
        fulls = {}
        for u in self._all_units():
            buf = torch.empty(u.padded, device=self._device)
            _quiet(dist.all_gather_into_tensor, buf, u.master.detach())
            fulls[id(u)] = buf
        if rank0_only and self.rank != 0:
            return {}
        out = {}
        tensors = {}
        for u in self._all_units():
            for i, ((_, p), off, shape) in enumerate(zip(u.params, u.offsets, u.shapes)):
                tensors[id(p)] = fulls[id(u)][off:off + shape.numel()].view(shape).clone()
        for name, pid in self._names:
            out[name] = tensors[pid]
        for name, b in self.module.named_buffers():
            out[name] = b.detach().clone()
        return out

    @torch.no_grad()
    def load_full_state_dict(self, state_dict: dict) -> None:
        """Load full parameters (and buffers) by name, as `full_state_dict` returns them: each
        rank copies its slice of every unit into its fp32 master shard (no communication:
        every rank needs the whole dict). Missing or unexpected names and wrong shapes raise
        ValueError. Gathered copies are dropped: call it between steps."""
        if not isinstance(state_dict, dict):
            raise ValueError(f"state_dict must be a dict, got {type(state_dict).__name__}")
        buffers = dict(self.module.named_buffers())
        expected = {n for n, _ in self._names} | set(buffers)
        missing, unexpected = sorted(expected - set(state_dict)), sorted(set(state_dict) - expected)
        if missing or unexpected:
            raise ValueError(f"state dict does not match the module: missing {missing}, unexpected {unexpected}")
        first = {}
        for name, pid in self._names:
            first.setdefault(pid, name)
        for u in self._all_units():
            flat = torch.zeros(u.padded, device=self._device)
            for (_, p), off, shape in zip(u.params, u.offsets, u.shapes):
                name = first[id(p)]
                t = state_dict[name]
                if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(shape):
                    got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                    raise ValueError(f"{name}: expected a tensor of shape {tuple(shape)}, got {got}")
                flat[off:off + shape.numel()].copy_(t.reshape(-1))
            u.master.copy_(flat[u.start:u.stop])
        for u in self._all_units():              # gathered copies of the old values are stale
            self._reshard(u, drop=True)
        for name, b in buffers.items():
            t = state_dict[name]
            if not isinstance(t, torch.Tensor) or t.shape != b.shape:
                raise ValueError(f"buffer {name}: expected shape {tuple(b.shape)}")
            b.copy_(t)
