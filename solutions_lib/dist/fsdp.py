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

__all__ = ["FlatShardFSDP", "fsdp_comm_bytes_per_step"]


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
