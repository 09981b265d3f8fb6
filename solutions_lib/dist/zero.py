"""ZeRO stage 1 by hand: AdamW whose moments live in shards, one contiguous slice per rank.

All trainable parameters are seen as one flat fp32 vector of P entries, padded with zeros to
``P_pad = N * ceil(P / N)`` so that N ranks own equal contiguous shards of ``S = P_pad / N``
entries (rank r owns ``[r S, (r + 1) S)``). One optimizer step on every rank:

1. flatten the local gradients (one micro-batch per rank) into a ``P_pad`` buffer;
2. ``reduce_scatter_tensor`` (SUM) and divide by N: my shard of the average gradient;
3. AdamW on my shard only (``exp_avg`` and ``exp_avg_sq`` exist for my S entries only);
4. ``all_gather_into_tensor`` of the updated shards: every rank has all P parameters again.

Memory (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", SC 2020, stage P_os): the optimizer state per rank falls from ``2 P`` fp32 values
(8 P bytes) to ``2 S = 2 P_pad / N``; with no padding exactly 1/N. Communication: a
reduce-scatter of the gradient plus an all-gather of the parameters move the same bytes as the
one all-reduce that plain data parallelism needs (a ring all-reduce *is* a reduce-scatter
followed by an all-gather), so stage 1 saves memory at no extra traffic.

The element-wise update is torch.optim.AdamW's single-tensor path (``foreach=False``), op for
op, so the result is bitwise equal to it when the gradients are (see `adamw_shard_update_`).
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Iterable

import torch
import torch.distributed as dist

from .._checks import count as _count

__all__ = ["ShardedOptimizer", "ZeroOneAdamW", "flat_shard_layout", "adamw_shard_update_", "adamw_state_bytes",
           "zero1_comm_bytes_per_step", "mlp", "regression_micro_batches", "reference_adamw_training"]


def _quiet(collective, *args, **kwargs):
    """Run a collective without torch 2.13's FutureWarning that renames it to *_single."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return collective(*args, **kwargs)


def flat_shard_layout(numel, world_size, rank=None):
    """(padded, shard, start, stop) of a flat vector of `numel` entries cut into `world_size` shards.

    padded = N ceil(P / N) entries (the last ``padded - P`` are zeros that nobody trains),
    shard = padded / N; rank r owns [start, stop) = [r shard, (r + 1) shard). Without `rank`,
    start/stop are those of rank 0. Units: entries (multiply by the element size for bytes).
    """
    p = _count("numel", numel, 1)
    n = _count("world_size", world_size, 1)
    r = 0 if rank is None else _count("rank", rank, 0)
    if r >= n:
        raise ValueError(f"rank {r} does not exist in a world of {n} ranks (0..{n - 1})")
    shard = -(-p // n)
    return shard * n, shard, r * shard, (r + 1) * shard


def _check_hparams(lr, betas, eps, weight_decay):
    for name, x in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    try:
        b1, b2 = betas
    except (TypeError, ValueError):
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}") from None
    for name, b in (("beta1", b1), ("beta2", b2)):
        if isinstance(b, bool) or not isinstance(b, numbers.Real) or not 0.0 <= b < 1.0:
            raise ValueError(f"{name} must lie in [0, 1), got {b!r}")
    return float(lr), (float(b1), float(b2)), float(eps), float(weight_decay)


@torch.no_grad()
def adamw_shard_update_(param, grad, exp_avg, exp_avg_sq, step, lr, betas=(0.9, 0.999), eps=1e-8,
                        weight_decay=1e-2) -> None:
    """One AdamW update of a (flat) tensor in place, op for op as torch.optim.AdamW(foreach=False).

    With t = `step` (1 for the first update)::

        theta <- theta (1 - lr wd)                       # decoupled decay
        m     <- lerp(m, g, 1 - beta1)                   # = beta1 m + (1 - beta1) g
        v     <- beta2 v + (1 - beta2) g^2
        theta <- theta - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    Every operation acts element by element, so updating a slice of a flat vector gives the
    same bits as updating the original parameter tensors (the math of
    `solutions_lib.optim.adamw_step`, in torch's order of operations).
    """
    t = _count("step", step, 1)
    lr, (b1, b2), eps, weight_decay = _check_hparams(lr, betas, eps, weight_decay)
    if not (param.shape == grad.shape == exp_avg.shape == exp_avg_sq.shape):
        raise ValueError(f"param, grad, exp_avg, exp_avg_sq must share one shape, got "
                         f"{[tuple(x.shape) for x in (param, grad, exp_avg, exp_avg_sq)]}")
    param.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad, 1 - b1)
    exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    bias1 = 1 - b1 ** float(t)
    bias2_sqrt = (1 - b2 ** float(t)) ** 0.5
    denom = (exp_avg_sq.sqrt() / bias2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-(lr / bias1))


def adamw_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the moment tensors (exp_avg, exp_avg_sq) a torch optimizer holds.

    The scalar ``step`` tensors (4 bytes per parameter tensor) are left out: they do not scale
    with the parameter count. DTensor states (FSDP2) count their local shard.
    """
    total = 0
    for st in optimizer.state.values():
        for key in ("exp_avg", "exp_avg_sq"):
            t = st.get(key)
            if t is not None:
                t = t.to_local() if hasattr(t, "to_local") else t
                total += t.numel() * t.element_size()
    return total


def zero1_comm_bytes_per_step(n_params, world_size, bytes_per_element=4, measure="payload") -> dict:
    """Collective bytes of one ZeRO-1 step over a flat buffer of P_pad = N ceil(P/N) entries.

    measure="payload" (what `CommCounter` counts, the full buffer of each op):
        reduce_scatter_tensor: P_pad e (its input), all_gather_into_tensor: P_pad e (its output).
    measure="wire" (bytes one rank sends with ring algorithms): (N-1)/N P_pad e for each, in
        total 2 (N-1)/N P_pad e, exactly a ring all-reduce of the gradient (plain DDP).
    N = 1 sends nothing on the wire.
    """
    padded, *_ = flat_shard_layout(n_params, world_size)
    e = _count("bytes_per_element", bytes_per_element, 1)
    if measure not in ("payload", "wire"):
        raise ValueError(f"measure must be 'payload' or 'wire', got {measure!r}")
    payload = padded * e
    each = payload if measure == "payload" else payload * (world_size - 1) / world_size
    return {"reduce_scatter_tensor": each, "all_gather_into_tensor": each}


class ZeroOneAdamW:
    """AdamW with ZeRO stage-1 sharding over the default process group (one flat fp32 buffer).

    Use like a torch optimizer, on every rank, after a backward pass on that rank's micro-batch:

        opt = ZeroOneAdamW(model.parameters(), lr=1e-3)
        loss_on_my_micro_batch.backward(); opt.step(); opt.zero_grad()

    `step` averages the gradients over the ranks (reduce-scatter SUM, then / N), updates the
    shard this rank owns, and all-gathers the result into every parameter. Each rank holds
    exp_avg and exp_avg_sq for S = ceil(P / N) entries: `state_bytes()` = 8 S bytes, i.e.
    1/N of the unsharded 8 P when N divides P; otherwise the zero padding (P_pad - P < N
    entries in all) adds at most 8 bytes per rank.

    Equivalence: with 2 ranks the parameters are bitwise those of a single process running
    torch.optim.AdamW(foreach=False) on the accumulated gradient (loss / N per micro-batch):
    a + b is commutative, and / 2 is exact. With more ranks the sum over ranks may be taken in
    another order than the sequential accumulation (gloo adds pairwise), which changes the
    last bits of the gradient (relative ~1e-7).
    """

    def __init__(self, params: Iterable[torch.Tensor], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-2, *, world_size: int | None = None):
        self.lr, self.betas, self.eps, self.weight_decay = _check_hparams(lr, betas, eps, weight_decay)
        params = [p for p in params if p.requires_grad]
        if not params:
            raise ValueError("ZeroOneAdamW got no trainable parameters (requires_grad=True); nothing to shard")
        if any(p.dtype != torch.float32 for p in params):
            raise ValueError(f"ZeroOneAdamW keeps one flat fp32 buffer; got dtypes {sorted({str(p.dtype) for p in params})}")
        if len({p.device for p in params}) != 1:
            raise ValueError("all parameters must live on one device")
        if len({id(p) for p in params}) != len(params):
            raise ValueError("a parameter appears twice in the list")
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("ZeroOneAdamW needs an initialised process group (run it under launch)")
        n = dist.get_world_size()
        if world_size is not None and world_size != n:
            raise ValueError(f"world_size={world_size} but the process group has {n} ranks")
        self.params = params
        self.world_size, self.rank = n, dist.get_rank()
        self.numel = sum(p.numel() for p in params)
        self.padded, self.shard, self.start, self.stop = flat_shard_layout(self.numel, n, self.rank)
        dev = params[0].device
        self.exp_avg = torch.zeros(self.shard, device=dev)
        self.exp_avg_sq = torch.zeros(self.shard, device=dev)
        self.step_count = 0

    # -- flat views
    def _flat(self, tensors) -> torch.Tensor:
        out = torch.zeros(self.padded, device=self.exp_avg.device)
        o = 0
        for p, t in zip(self.params, tensors):
            if t is not None:
                out[o:o + p.numel()].copy_(t.reshape(-1))
            o += p.numel()
        return out

    def state_bytes(self) -> int:
        """Bytes of the optimizer state this rank holds (its two moment shards), measured."""
        return sum(t.numel() * t.element_size() for t in (self.exp_avg, self.exp_avg_sq))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """Reduce-scatter the gradients, update my shard with AdamW, all-gather the parameters."""
        if all(p.grad is None for p in self.params):
            raise ValueError("no parameter has a gradient: call backward() before step()")
        grad_flat = self._flat([p.grad for p in self.params])   # missing grads count as zero
        grad_shard = torch.empty(self.shard, device=grad_flat.device)
        _quiet(dist.reduce_scatter_tensor, grad_shard, grad_flat, op=dist.ReduceOp.SUM)
        grad_shard.div_(self.world_size)
        param_shard = self._flat(self.params)[self.start:self.stop].clone()
        self.step_count += 1
        adamw_shard_update_(param_shard, grad_shard, self.exp_avg, self.exp_avg_sq, self.step_count,
                            self.lr, self.betas, self.eps, self.weight_decay)
        full = torch.empty(self.padded, device=param_shard.device)
        _quiet(dist.all_gather_into_tensor, full, param_shard)
        o = 0
        for p in self.params:
            p.copy_(full[o:o + p.numel()].view_as(p))
            o += p.numel()


# ---------------------------------------------------------------- the single-process oracle


def mlp(dims, seed=0) -> torch.nn.Sequential:
    """Linear(d0, d1), Tanh, Linear(d1, d2), ... with torch's default init after manual_seed(seed)."""
    dims = [_count("dims[i]", d, 1) for d in dims]
    if len(dims) < 2:
        raise ValueError(f"dims needs at least an input and an output size, got {dims}")
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        layers += [torch.nn.Linear(a, b)] + ([torch.nn.Tanh()] if i < len(dims) - 2 else [])
    return torch.nn.Sequential(*layers)


def regression_micro_batches(steps, world_size, d_in, d_out, batch=5, seed=1):
    """batches[step][rank] = (x (batch, d_in), y (batch, d_out)): standard normal, seeded."""
    steps, world_size = _count("steps", steps, 1), _count("world_size", world_size, 1)
    g = torch.Generator().manual_seed(seed)
    return [[(torch.randn(batch, d_in, generator=g), torch.randn(batch, d_out, generator=g))
             for _ in range(world_size)] for _ in range(steps)]


def reference_adamw_training(model: torch.nn.Module, batches, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                             weight_decay=1e-2) -> dict:
    """One process: per step, accumulate mse(model(x_r), y_r) / N over the N micro-batches, then
    torch.optim.AdamW(foreach=False). The oracle for data-parallel, ZeRO and FSDP runs.

    Returns {"params": [tensors], "flat": the flat parameter vector, "losses": losses[step][rank]
    (unscaled, as each rank sees them), "state_bytes": bytes of exp_avg + exp_avg_sq}.
    """
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                            foreach=False)
    losses = []
    for step in batches:
        opt.zero_grad()
        row = []
        for x, y in step:
            loss = torch.nn.functional.mse_loss(model(x), y)
            (loss / len(step)).backward()
            row.append(loss.detach())
        losses.append(row)
        opt.step()
    params = [p.detach().clone() for p in model.parameters()]
    return {"params": params, "flat": torch.cat([p.reshape(-1) for p in params]), "losses": losses,
            "state_bytes": adamw_state_bytes(opt)}


# ---------------------------------------------------------------- ZeRO-1/2 around any torch optimizer

# optimizers whose update of an entry depends on that entry (and scalars) only: any cut of the
# flat vector gives the same numbers. The others (Lamb: a norm per tensor) get whole tensors.
_ELEMENTWISE = ("SGD", "Adam", "AdamW", "Adagrad", "Adamax", "RMSprop", "NAdam", "RAdam", "ASGD", "Rprop")


def _tensor_state_bytes(state: dict) -> int:
    """Bytes of the tensors (dim >= 1) in an optimizer's `state` (scalar step counters left out)."""
    total = 0
    for st in state.values():
        for t in st.values():
            if isinstance(t, torch.Tensor) and t.dim() > 0:
                total += t.numel() * t.element_size()
    return total


class ShardedOptimizer(torch.optim.Optimizer):
    """ZeRO stage 1 or 2 around any ``torch.optim.Optimizer`` class (Rajbhandari et al., SC 2020).

        opt = ShardedOptimizer(model.parameters(), torch.optim.AdamW, stage=2, lr=1e-3)
        loss_on_my_micro_batch.backward(); opt.step(); opt.zero_grad()

    Every rank holds all parameters (data parallel) but the wrapped optimizer, built on this
    rank only, sees its shard: a list of fp32 "pieces", each a slice of one parameter. A step:

    1. gradients: stage 1 flattens the local gradients into one buffer of N S entries and
       ``reduce_scatter_tensor``-s it (SUM) at `step`; stage 2 registers post-accumulate-grad
       hooks that, as soon as a parameter's gradient is in, ``reduce`` each piece to the rank
       that owns it (the same reduce-scatter, cut at parameter boundaries so it runs during
       backward) and drop the full gradient (``p.grad = None``): a rank keeps gradients for its
       S entries only. Either way the sum is divided by N (the average gradient);
    2. the wrapped optimizer steps the pieces (param groups and their hyperparameters are
       those of this wrapper's ``param_groups``, copied at every step, so LR schedulers work);
    3. ``all_gather_into_tensor`` of the updated shards writes every parameter on every rank.

    Partition: ``"flat"`` cuts the flat vector of P entries into N equal shards of
    S = ceil(P / N) (pieces cross tensor boundaries: right for element-wise optimizers, SGD,
    Adam, AdamW, ...); ``"params"`` gives whole tensors to ranks (contiguous, balanced by size;
    S = the largest rank's share), needed when the update uses a per-tensor quantity: the
    course's Lamb (a trust ratio ||w|| / ||u|| per tensor) gets whole tensors, so its norms are
    the full tensor's. ``"auto"`` (default): flat for torch's element-wise optimizers, params
    otherwise. Optimizer state per rank: the wrapped optimizer's state for S entries, 1/N of
    the unsharded (`state_bytes`). Communication per step (payload): N S e for the
    reduce-scatter (stage 2: the same bytes in one ``reduce`` per (parameter, owner) piece) and
    N S e for the all-gather, as `zero1_comm_bytes_per_step`.

    A parameter that has no gradient on this rank counts as zero gradient (all ranks must
    take part in the collectives). A frozen parameter (``requires_grad=False`` at construction)
    is accepted and skipped, as torch's optimizers skip it: it stays in ``param_groups`` but is
    never sharded, communicated or updated. `state_dict`/`load_state_dict` save and restore this rank's
    shard (the same world size and partition are required).

    ``max_norm`` (default None: no clipping): global-norm gradient clipping of the averaged
    gradient, as ``torch.nn.utils.clip_grad_norm_(params, max_norm)`` before ``step`` on one
    process: the 2-norm over all parameters' gradients is assembled from the ranks' shards with
    one all-reduce of the squared partial norms (one scalar per rank, 4 or 8 bytes), every shard
    is scaled by min(1, max_norm / (norm + 1e-6)), and the norm before clipping is kept in
    ``last_grad_norm`` (a 0-dim tensor, what clip_grad_norm_ returns).
    """

    def __init__(self, params, optimizer_cls, stage: int = 1, *, partition: str = "auto",
                 world_size: int | None = None, max_norm: float | None = None, **kwargs):
        if not (isinstance(optimizer_cls, type) and issubclass(optimizer_cls, torch.optim.Optimizer)):
            raise ValueError(f"optimizer_cls must be a torch.optim.Optimizer subclass, got {optimizer_cls!r}")
        if isinstance(stage, bool) or stage not in (1, 2):
            raise ValueError(f"stage must be 1 (optimizer state sharded) or 2 (and gradients), got {stage!r}")
        if partition not in ("auto", "flat", "params"):
            raise ValueError(f"partition must be 'auto', 'flat' or 'params', got {partition!r}")
        if max_norm is not None and (isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real)
                                     or not math.isfinite(max_norm) or max_norm <= 0):
            raise ValueError(f"max_norm must be None (no clipping) or a finite number > 0, got {max_norm!r}")
        self.max_norm = None if max_norm is None else float(max_norm)
        self.last_grad_norm: torch.Tensor | None = None
        if partition == "auto":
            partition = "flat" if optimizer_cls.__name__ in _ELEMENTWISE and optimizer_cls.__module__.startswith(
                "torch.optim") else "params"
        if isinstance(params, torch.Tensor):
            raise ValueError("params must be an iterable of tensors or of param-group dicts, not one tensor")
        groups = list(params)
        if not groups:
            raise ValueError("ShardedOptimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("ShardedOptimizer needs an initialised process group (run it under launch)")
        n = dist.get_world_size()
        if world_size is not None and world_size != n:
            raise ValueError(f"world_size={world_size} but the process group has {n} ranks")
        try:   # the wrapped optimizer's defaults (and a check of kwargs) on a dummy tensor
            defaults = dict(optimizer_cls([torch.zeros(1, requires_grad=True)], **kwargs).defaults)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{optimizer_cls.__name__} rejects the arguments {kwargs}: {e}") from None
        super().__init__(groups, defaults)
        every = [p for g in self.param_groups for p in g["params"]]
        if len({id(p) for p in every}) != len(every):
            raise ValueError("a parameter appears twice in the list")
        # frozen parameters (requires_grad=False when the optimizer is built) are accepted and
        # skipped, as torch's optimizers do: never sharded, never communicated, never updated
        plist = [p for p in every if p.requires_grad]
        if not plist:
            raise ValueError("no parameter given to ShardedOptimizer requires grad: nothing to optimize")
        if len({p.dtype for p in plist}) != 1 or len({p.device for p in plist}) != 1:
            raise ValueError("all trainable parameters must share one dtype and one device (one flat buffer)")
        self.optimizer_cls, self.stage, self.partition = optimizer_cls, stage, partition
        self.world_size, self.rank = n, dist.get_rank()
        self._params = plist
        self._group_of = [gi for gi, g in enumerate(self.param_groups) for p in g["params"] if p.requires_grad]
        self.numel = sum(p.numel() for p in plist)
        self._layout(n)
        dev, dt = plist[0].device, plist[0].dtype
        # my pieces: (param index, lo, hi) of the flattened parameter, at offset `at` of my chunk
        self._pieces = []
        at = 0
        for i, lo, hi in self._owned[self.rank]:
            p = plist[i]
            whole = lo == 0 and hi == p.numel()
            t = p.detach().clone() if whole else p.detach().reshape(-1)[lo:hi].clone()
            self._pieces.append((i, lo, hi, at, t.requires_grad_(True)))
            at += hi - lo
        self._chunk = at
        local_groups, self._local_of = [], []
        for gi, g in enumerate(self.param_groups):
            mine = [t for i, _, _, _, t in self._pieces if self._group_of[i] == gi]
            if mine:
                self._local_of.append(gi)
                local_groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": mine})
        self.local_optimizer = optimizer_cls(local_groups, **kwargs) if local_groups else None
        self._grad_shard: torch.Tensor | None = None
        self._device, self._dtype = dev, dt
        self._hooks = []
        if stage == 2:
            for i, p in enumerate(plist):
                self._hooks.append(p.register_post_accumulate_grad_hook(
                    lambda t, i=i: self._reduce_param(i, t)))

    # -- layout: every rank owns a list of pieces; rank r's chunk sits at [r S, r S + len_r) of
    #    a buffer of N S entries (S = the largest chunk; shorter chunks are padded with zeros)
    def _layout(self, n):
        sizes = [p.numel() for p in self._params]
        owned = [[] for _ in range(n)]
        if self.partition == "flat":
            padded, shard, _, _ = flat_shard_layout(self.numel, n)
            o = 0
            for i, s in enumerate(sizes):
                a = o
                while a < o + s:
                    r = a // shard
                    b = min(o + s, (r + 1) * shard)
                    owned[r].append((i, a - o, b - o))
                    a = b
                o += s
        else:
            cum = 0
            for i, s in enumerate(sizes):   # the rank whose equal share holds the tensor's middle
                r = min(n - 1, int(n * (cum + s / 2) / self.numel))
                owned[r].append((i, 0, s))
                cum += s
        self._owned = owned
        self.shard = max(sum(b - a for _, a, b in o) for o in owned)
        self.padded = n * self.shard

    def _pack(self, tensors) -> torch.Tensor:
        """A buffer of N S entries holding, for every rank, the pieces it owns of `tensors`."""
        buf = torch.zeros(self.padded, device=self._device, dtype=self._dtype)
        for r, pieces in enumerate(self._owned):
            at = r * self.shard
            for i, lo, hi in pieces:
                t = tensors[i]
                if t is not None:
                    buf[at:at + hi - lo].copy_(t.reshape(-1)[lo:hi])
                at += hi - lo
        return buf

    def _reduce_param(self, i, p):
        """Stage 2: reduce each piece of parameter i's gradient to its owner; keep only mine."""
        g = p.grad.reshape(-1)
        for r, pieces in enumerate(self._owned):
            at = 0
            for j, lo, hi in pieces:
                if j == i:
                    part = g[lo:hi].clone()
                    _quiet(dist.reduce, part, dst=r, op=dist.ReduceOp.SUM)
                    if r == self.rank:
                        if self._grad_shard is None:
                            self._grad_shard = torch.zeros(self.shard, device=g.device, dtype=g.dtype)
                        self._grad_shard[at:at + hi - lo].add_(part)
                at += hi - lo
        p.grad = None

    # -- torch.optim.Optimizer interface
    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()
        self._grad_shard = None

    @torch.no_grad()
    def step(self, closure=None):
        """Average the gradients (my shard), step the wrapped optimizer on it, all-gather."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.stage == 1:
            if all(p.grad is None for p in self._params):
                raise ValueError("no parameter has a gradient: call backward() before step()")
            flat = self._pack([p.grad for p in self._params])
            mine = torch.empty(self.shard, device=self._device, dtype=self._dtype)
            _quiet(dist.reduce_scatter_tensor, mine, flat, op=dist.ReduceOp.SUM)
        else:
            mine = self._grad_shard if self._grad_shard is not None else torch.zeros(
                self.shard, device=self._device, dtype=self._dtype)
            self._grad_shard = None
        mine = mine.div_(self.world_size)
        if self.max_norm is not None:
            self._clip_(mine)
        for i, lo, hi, at, t in self._pieces:
            t.copy_(self._params[i].detach().reshape(-1)[lo:hi].view_as(t))   # the current values
            t.grad = mine[at:at + hi - lo].view_as(t)
        if self.local_optimizer is not None:
            for lg, gi in zip(self.local_optimizer.param_groups, self._local_of):
                for k, v in self.param_groups[gi].items():
                    if k != "params":
                        lg[k] = v
            self.local_optimizer.step()
        out = torch.zeros(self.shard, device=self._device, dtype=self._dtype)
        for _, lo, hi, at, t in self._pieces:
            out[at:at + hi - lo].copy_(t.reshape(-1))
            t.grad = None
        full = torch.empty(self.padded, device=self._device, dtype=self._dtype)
        _quiet(dist.all_gather_into_tensor, full, out)
        for r, pieces in enumerate(self._owned):
            at = r * self.shard
            for i, lo, hi in pieces:
                self._params[i].detach().reshape(-1)[lo:hi].copy_(full[at:at + hi - lo])
                at += hi - lo
        return loss

    def _clip_(self, mine: torch.Tensor) -> None:
        """Global-norm clipping of the averaged gradient, sharded: every rank squares and sums its
        shard (padding entries are zeros), one all-reduce (SUM) of that scalar gives ||g||^2 over
        all parameters, and each shard is scaled by min(1, max_norm / (||g|| + 1e-6)), as
        torch.nn.utils.clip_grad_norm_ does. The norm (before clipping) is kept in
        `last_grad_norm`, the value clip_grad_norm_ returns."""
        sq = mine.pow(2).sum().reshape(1)
        _quiet(dist.all_reduce, sq, op=dist.ReduceOp.SUM)
        norm = sq.sqrt()[0]
        coef = torch.clamp(self.max_norm / (norm + 1e-6), max=1.0)
        mine.mul_(coef)
        self.last_grad_norm = norm

    def state_bytes(self) -> int:
        """Bytes of the wrapped optimizer's tensor state on this rank (scalars left out)."""
        return 0 if self.local_optimizer is None else _tensor_state_bytes(self.local_optimizer.state)

    def grad_bytes(self) -> int:
        """Bytes of gradient storage this rank holds now (full .grad tensors + the stage-2 shard)."""
        total = sum(p.grad.numel() * p.grad.element_size() for p in self._params if p.grad is not None)
        if self._grad_shard is not None:
            total += self._grad_shard.numel() * self._grad_shard.element_size()
        return total

    def _layout_key(self):
        return {"world_size": self.world_size, "rank": self.rank, "partition": self.partition,
                "sizes": [p.numel() for p in self._params]}

    def state_dict(self) -> dict:
        """This rank's shard: the wrapped optimizer's state_dict, the wrapper's param-group
        hyperparameters and the layout it belongs to."""
        return {"layout": self._layout_key(),
                "param_groups": [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups],
                "local": None if self.local_optimizer is None else self.local_optimizer.state_dict()}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what `state_dict` returned on this rank (same world size, rank, partition, sizes)."""
        if not isinstance(state_dict, dict) or set(state_dict) != {"layout", "param_groups", "local"}:
            raise ValueError("not a ShardedOptimizer state dict (keys layout, param_groups, local)")
        if state_dict["layout"] != self._layout_key():
            raise ValueError(f"the state dict was saved with layout {state_dict['layout']}, "
                             f"this optimizer has {self._layout_key()}")
        if len(state_dict["param_groups"]) != len(self.param_groups):
            raise ValueError("the state dict has another number of param groups")
        for g, saved in zip(self.param_groups, state_dict["param_groups"]):
            g.update(saved)
        if self.local_optimizer is not None:
            self.local_optimizer.load_state_dict(state_dict["local"])
