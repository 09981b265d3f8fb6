"""Data parallelism by hand: gradient averaging one tensor at a time, then in buckets that
overlap with the backward pass, plus the single-process reference both must reproduce.

Design after PyTorch's DistributedDataParallel (Li et al. 2020, "PyTorch Distributed:
Experiences on Accelerating Data Parallel Training", VLDB 13(12), sec. 3-4): parameters are
broadcast from rank 0 once, every rank runs forward and backward on its own micro-batch, and
the gradients are averaged with all-reduce before the optimizer step, so the replicas stay
identical without ever sending parameters again.

* `NaiveDDP`: after ``backward()``, one ``all_reduce`` per trainable parameter (SUM, then divide
  by the world size). Calls per step = number of trainable parameter tensors.
* `BucketedDDP`: trainable parameters are grouped in reverse registration order into flat
  buckets of about ``bucket_cap_bytes``; a post-accumulate-grad hook counts the gradients that
  are ready and launches the bucket's ``all_reduce(async_op=True)`` as soon as its last
  gradient arrives, while backward is still computing the earlier layers. Calls per step =
  number of buckets; each call costs a latency alpha, so fewer, larger calls are cheaper
  (alpha-beta model, `solutions_lib.comms`).
* Bytes per step (payload S, what `CommCounter` counts) are the same for both: the bytes of
  every trainable gradient, a tied parameter once, a frozen one not at all.

Why the average is the right gradient: with the loss of the global batch defined as the mean of
the ranks' micro-batch losses, its gradient is (1/N) sum_r g_r, which is exactly what
`grad_accumulation_reference` computes in one process.
"""
from __future__ import annotations

import contextlib
import math
from numbers import Real
from typing import Callable, Iterable, Sequence

import torch
import torch.distributed as dist
from torch import nn

from .._checks import count as _int

__all__ = [
    "DEFAULT_BUCKET_CAP_BYTES", "NaiveDDP", "BucketedDDP", "grad_accumulation_reference",
    "trainable_parameters", "grad_sizes_reverse", "bucket_plan", "ddp_comm_calls_per_step",
    "ddp_comm_bytes_per_step", "ddp_step_benchmark",
]

DEFAULT_BUCKET_CAP_BYTES = 25 * 2 ** 20  # torch DDP's bucket_cap_mb=25


# ---------------------------------------------------------------- formulas


def trainable_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The parameters that need a gradient, each once, in registration order.

    ``module.parameters()`` already removes duplicates, so a tied parameter (one Parameter
    registered under two names) appears once; a frozen one (``requires_grad=False``) is dropped.
    """
    return [p for p in module.parameters() if p.requires_grad]


def grad_sizes_reverse(module: nn.Module) -> list[int]:
    """Gradient bytes (numel * element size) of each trainable parameter, last-registered first:
    the order `BucketedDDP` (and torch DDP) fills its buckets in."""
    return [p.numel() * p.element_size() for p in reversed(trainable_parameters(module))]


def bucket_plan(sizes_bytes: Sequence[int], cap_bytes: float) -> list[list[int]]:
    """Split tensors (given in the order their gradients become ready) into buckets.

    Greedy, as torch DDP does: add tensors to the open bucket until its size reaches or exceeds
    `cap_bytes`, then close it; a tensor larger than the cap ends the bucket it joins. Returns
    the indices (into `sizes_bytes`) of each bucket. Number of all-reduce calls per step =
    ``len(bucket_plan(...))``. Bytes, cap in bytes.
    """
    if isinstance(cap_bytes, bool) or not isinstance(cap_bytes, Real) or not math.isfinite(cap_bytes) \
            or cap_bytes <= 0:
        raise ValueError(f"bucket cap must be a finite number of bytes > 0, got {cap_bytes!r}")
    sizes = [_int(f"sizes_bytes[{i}]", s, minimum=0) for i, s in enumerate(sizes_bytes)]
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i, s in enumerate(sizes):
        current.append(i)
        filled += s
        if filled >= cap_bytes:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


def ddp_comm_calls_per_step(module: nn.Module, world_size: int, method: str = "bucketed",
                            bucket_cap_bytes: float = DEFAULT_BUCKET_CAP_BYTES) -> int:
    """All-reduce calls per optimizer step: "naive" one per trainable parameter tensor,
    "bucketed" one per bucket of `bucket_plan`; 0 when world_size == 1 (nothing to average)."""
    w = _int("world_size", world_size)
    if method not in ("naive", "bucketed"):
        raise ValueError(f"method must be 'naive' or 'bucketed', got {method!r}")
    sizes = grad_sizes_reverse(module)
    plan = bucket_plan(sizes, bucket_cap_bytes)
    if w == 1:
        return 0
    return len(sizes) if method == "naive" else len(plan)


def ddp_comm_bytes_per_step(module: nn.Module, world_size: int, measure: str = "payload") -> float:
    """All-reduce bytes per optimizer step, naive or bucketed alike: S = sum of the trainable
    gradients' bytes (tied once, frozen excluded); measure="wire" gives the ring's
    2 (N-1)/N * S per rank. Same as `solutions_lib.parallel.dp_comm_bytes_per_step` for one dtype."""
    # inline, not parallel.dp_comm_bytes_per_step (same value, tests/test_dist_ddp.py): the lab kit also
    # runs where the course's answers are withheld (course/withheld_view.py), e.g. in a graded notebook
    from fractions import Fraction

    w = _int("world_size", world_size)
    if measure not in ("payload", "wire"):
        raise ValueError(f"measure must be 'payload' (buffer size S) or 'wire' (ring bytes sent per rank), got {measure!r}")
    total = sum(grad_sizes_reverse(module))
    if not total or w == 1:
        return 0.0
    return float(total if measure == "payload" else total * Fraction(2 * (w - 1), w))


# ---------------------------------------------------------------- wrappers


def _world() -> int:
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("initialise a process group first (solutions_lib.dist.launch does)")
    return dist.get_world_size()


def _broadcast_state(module: nn.Module) -> None:
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.data, src=0)


class NaiveDDP(nn.Module):
    """Replicate `module` and average its gradients with one all-reduce per trainable parameter.

    Use: ``loss.backward(); ddp.sync_gradients(); optimizer.step()``.

    Every trainable parameter is reduced, in registration order, even one this rank did not use
    in its forward (its gradient is None: it sends zeros and receives the average). The reason
    is the collective contract: the k-th collective of every rank is matched with the k-th of
    the others, so if one rank skipped a tensor, its next all-reduce would be paired with a
    different tensor on the other rank (wrong sums, a size mismatch) or wait forever.
    A parameter that no rank used also gets a zero gradient (torch DDP leaves it None).
    """

    def __init__(self, module: nn.Module):
        super().__init__()
        self.world_size = _world()
        self.module = module
        _broadcast_state(module)
        self.params = trainable_parameters(module)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @torch.no_grad()
    def sync_gradients(self) -> None:
        """SUM-all-reduce each trainable gradient, then divide by the world size."""
        if self.world_size == 1:
            return
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad.div_(self.world_size)


class BucketedDDP(nn.Module):
    """Average gradients in flat buckets whose all-reduce starts during backward.

    Use: ``loss.backward(); ddp.finish(); optimizer.step()``.

    Buckets hold the trainable parameters in reverse registration order (backward produces the
    last layer's gradients first), closed when they reach `bucket_cap_bytes` (`bucket_plan`).
    A post-accumulate-grad hook on every trainable parameter counts ready gradients; when a
    bucket is complete its gradients are copied into its flat buffer and
    ``all_reduce(buffer, async_op=True)`` starts at once. Buckets are launched strictly in index
    order (a complete bucket waits for the earlier ones), so every rank issues the same
    collectives in the same order even when a parameter is unused on one rank: that bucket, and
    those after it, are launched by `finish()` with zeros standing in for the missing gradient.

    `finish()` launches what is left, waits for every handle, divides by the world size and
    makes each ``.grad`` a view of its slice of the bucket (no copy back, like torch's
    ``gradient_as_bucket_view=True``; the buffer is rewritten in the next step's sync). Frozen parameters get no hook and are never sent;
    a tied parameter is one Parameter, so one hook (it fires once, after both uses are summed)
    and one slot in a bucket.

    Counters (`last_step` after each `finish()`, also totals in `totals`): hooks_fired,
    launched_from_hook, launched_at_finish, and for each bucket the number of hooks that had
    fired when it was launched (`hooks_at_launch`): a value below the number of trainable
    parameters means the all-reduce started while backward still had gradients to compute.
    Inside ``with ddp.no_sync():`` the hooks do nothing and gradients accumulate locally.

    Options as torch's DDP (off by default: each adds collectives to the counts above):
    ``unused_grad_none=True``: `finish()` also all-reduces (MAX) one flag per parameter, "had a
    gradient on this rank"; a parameter unused on every rank keeps ``grad=None`` (torch leaves
    it untouched), so a stepping optimizer skips it; zero_grad(set_to_none=True) between steps.
    ``broadcast_buffers=True``: every forward first broadcasts the module's buffers from rank 0
    (torch's default), so running statistics cannot drift apart.
    """

    def __init__(self, module: nn.Module, bucket_cap_bytes: float = DEFAULT_BUCKET_CAP_BYTES, *,
                 unused_grad_none: bool = False, broadcast_buffers: bool = False):
        super().__init__()
        for name, flag in (("unused_grad_none", unused_grad_none), ("broadcast_buffers", broadcast_buffers)):
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be True or False, got {flag!r}")
        self.unused_grad_none, self.broadcast_buffers = unused_grad_none, broadcast_buffers
        self.world_size = _world()
        self.module = module
        params = trainable_parameters(module)
        dtypes = {p.dtype for p in params}
        if len(dtypes) > 1:
            raise ValueError(f"BucketedDDP needs one gradient dtype, got {sorted(map(str, dtypes))}")
        order = list(reversed(params))
        self.plan = bucket_plan([p.numel() * p.element_size() for p in order], bucket_cap_bytes)
        self.bucket_cap_bytes = bucket_cap_bytes
        self.buckets = [[order[i] for i in idx] for idx in self.plan]
        self._where = {}
        self.buffers_ = []
        for b, bucket in enumerate(self.buckets):
            offset = 0
            for p in bucket:
                self._where[id(p)] = (b, offset)
                offset += p.numel()
            self.buffers_.append(torch.zeros(offset, dtype=bucket[0].dtype, device=bucket[0].device))
        self.n_params = len(params)
        _broadcast_state(module)
        self._sync = True
        self.totals = {"steps": 0, "hooks_fired": 0, "launched_from_hook": 0, "launched_at_finish": 0}
        self.last_step: dict = {}
        self._reset()
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad_ready) for p in params]

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers and self.world_size > 1:
            with torch.no_grad():
                for t in self.module.buffers():
                    dist.broadcast(t.data, src=0)
        return self.module(*args, **kwargs)

    def _reset(self) -> None:
        self._seen: set = set()
        self._ready = [0] * len(self.buckets)
        self._handles: list = [None] * len(self.buckets)
        self._next = 0
        self._used: dict = {}
        self._step = {"hooks_fired": 0, "launched_from_hook": 0, "launched_at_finish": 0,
                      "hooks_at_launch": [None] * len(self.buckets)}

    @contextlib.contextmanager
    def no_sync(self):
        """Accumulate gradients locally (micro-batches without communication); the next backward
        outside the block synchronises the accumulated gradients."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    def _on_grad_ready(self, p: torch.Tensor) -> None:
        if not self._sync or self.world_size == 1 or id(p) in self._seen:
            return
        self._seen.add(id(p))
        self._step["hooks_fired"] += 1
        b, _ = self._where[id(p)]
        self._ready[b] += 1
        while self._next < len(self.buckets) and self._ready[self._next] == len(self.buckets[self._next]):
            self._launch(self._next, "launched_from_hook")

    @torch.no_grad()
    def _launch(self, b: int, how: str) -> None:
        buf = self.buffers_[b]
        for p in self.buckets[b]:
            _, off = self._where[id(p)]
            view = buf[off:off + p.numel()]
            self._used[id(p)] = p.grad is not None
            if p.grad is None:
                view.zero_()
            elif p.grad.data_ptr() != view.data_ptr():  # else .grad already is this slice
                view.copy_(p.grad.reshape(-1))
        self._handles[b] = dist.all_reduce(buf, op=dist.ReduceOp.SUM, async_op=True)
        self._step[how] += 1
        self._step["hooks_at_launch"][b] = self._step["hooks_fired"]
        self._next = b + 1

    @torch.no_grad()
    def finish(self) -> dict:
        """Launch the buckets not launched yet, wait for all, average into ``.grad``.

        Returns this step's counters (also kept in `last_step`)."""
        if self.world_size > 1:
            while self._next < len(self.buckets):
                self._launch(self._next, "launched_at_finish")
            unused = set()
            if self.unused_grad_none:
                ps = [p for bucket in self.buckets for p in bucket]
                used = torch.tensor([float(self._used[id(p)]) for p in ps])
                dist.all_reduce(used, op=dist.ReduceOp.MAX)
                unused = {id(p) for p, u in zip(ps, used.tolist()) if u == 0.0}
            for b, handle in enumerate(self._handles):
                handle.wait()
                buf = self.buffers_[b]
                buf.div_(self.world_size)
                for p in self.buckets[b]:
                    _, off = self._where[id(p)]
                    # .grad becomes a view of the bucket (torch's gradient_as_bucket_view): no
                    # copy back; the next step's backward writes a fresh .grad (or accumulates
                    # into this view when the grads are not reset), the hook copies it in.
                    if id(p) not in unused:
                        p.grad = buf[off:off + p.numel()].view_as(p)
        step = self._step
        self.last_step = step
        self.totals["steps"] += 1
        for k in ("hooks_fired", "launched_from_hook", "launched_at_finish"):
            self.totals[k] += step[k]
        self._reset()
        return step

    def remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []


# ---------------------------------------------------------------- the single-process oracle


def grad_accumulation_reference(model: nn.Module, optimizer: torch.optim.Optimizer,
                                loss_fn: Callable[[nn.Module, object], torch.Tensor],
                                steps: Iterable[Sequence[object]]) -> list[float]:
    """What N data-parallel ranks compute, done in one process by gradient accumulation.

    `steps` holds, for each optimizer step, the N micro-batches (one per rank, in rank order);
    ``loss_fn(model, batch)`` returns a micro-batch's loss. Each micro-batch's loss is divided
    by N before its backward, the gradients accumulate in ``.grad``, then one optimizer step:
    grad = sum_r g_r / N, the average an all-reduce produces. Returns the mean loss per step.

    Bitwise agreement with a DDP run needs the same forward/backward bits (same shapes and
    thread count) and a sum that rounds the same: for N = 2 both give (g_0 + g_1)/2 exactly
    (halving is exact in binary floating point); for N > 2 the accumulation adds in rank order
    while the all-reduce adds in the order of its algorithm, so results agree to rounding only.
    """
    losses = []
    for batches in steps:
        batches = list(batches)
        n = _int("micro-batches per step", len(batches))
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for batch in batches:
            loss = loss_fn(model, batch)
            (loss / n).backward()
            total += float(loss.detach())
        optimizer.step()
        losses.append(total / n)
    return losses


# ---------------------------------------------------------------- step-time benchmark

BENCH_METHODS = ("no_comm", "torch_ddp", "naive", "bucketed")


def _bench_model(width: int, depth: int, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def _bench_rank(rank, world_size, width, depth, batch, steps, warmup, rounds, caps, methods):
    import statistics
    import time

    from torch.nn.parallel import DistributedDataParallel

    from .counting import CommCounter

    variants = [(m, None) for m in methods if m != "bucketed"]
    variants += [("bucketed", c) for c in caps] if "bucketed" in methods else []
    g = torch.Generator().manual_seed(1000 + rank)
    x, y = torch.randn(batch, width, generator=g), torch.randn(batch, width, generator=g)
    setups = []
    for name, cap in variants:
        model = _bench_model(width, depth)
        if name == "no_comm":  # the compute alone: what a step would cost with free communication
            wrapper, sync = model, (lambda w: None)
        elif name == "torch_ddp":
            wrapper, sync = DistributedDataParallel(model), (lambda w: None)
        elif name == "naive":
            wrapper, sync = NaiveDDP(model), (lambda w: w.sync_gradients())
        else:
            wrapper, sync = BucketedDDP(model, cap), (lambda w: w.finish())
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        setups.append((name, cap, wrapper, sync, opt))

    def step(wrapper, sync, opt):
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(wrapper(x), y).backward()
        sync(wrapper)
        opt.step()

    times: dict[int, list[float]] = {i: [] for i in range(len(setups))}
    comm = {}
    for i, (name, cap, wrapper, sync, opt) in enumerate(setups):
        for _ in range(warmup):
            step(wrapper, sync, opt)
        with CommCounter() as c:
            step(wrapper, sync, opt)
        comm[i] = (c.calls["all_reduce"], c.bytes["all_reduce"])
    for _ in range(rounds):  # interleave the methods so a busy moment hits all of them
        for i, (name, cap, wrapper, sync, opt) in enumerate(setups):
            for _ in range(steps):
                dist.barrier()
                t0 = time.perf_counter()
                step(wrapper, sync, opt)
                times[i].append(time.perf_counter() - t0)
    rows = []
    for i, (name, cap, wrapper, sync, opt) in enumerate(setups):
        model = getattr(wrapper, "module", wrapper)
        per_round = [statistics.median(times[i][r * steps:(r + 1) * steps]) for r in range(rounds)]
        rows.append({"method": name, "cap_bytes": cap, "median_s": statistics.median(times[i]),
                     "min_s": min(times[i]), "round_medians_s": per_round, "calls": comm[i][0], "bytes": comm[i][1],
                     "predicted_calls": (None if name in ("torch_ddp", "no_comm") else
                                         ddp_comm_calls_per_step(model, world_size, name, cap or 1)),
                     "predicted_bytes": 0 if name == "no_comm" else ddp_comm_bytes_per_step(model, world_size)})
    return rows


def ddp_step_benchmark(width: int = 512, depth: int = 8, batch: int = 64, steps: int = 5, warmup: int = 2,
                       rounds: int = 3, caps: Sequence[float] = (1 << 20, 4 << 20), world_size: int = 2,
                       methods: Sequence[str] = BENCH_METHODS) -> dict:
    """Step time (forward + backward + sync + SGD step) of torch DDP, `NaiveDDP` and `BucketedDDP`
    (one row per bucket cap) on `world_size` local ranks, same model and data for all, plus
    "no_comm" (each rank alone, no gradient sync: the compute floor).

    Model: `depth` Linear(width, width) layers (fp32), so gradient bytes = 4 depth (width^2 + width).
    Each rank reports the median of `rounds` x `steps` timed steps (methods interleaved per round,
    a barrier before each step) and each round's own median (`round_medians_s`: their spread is the
    run-to-run noise a difference must exceed); the result is rank 0's rows plus the gradient bytes.
    Calls and bytes per step come from `CommCounter` (torch DDP's collectives run in C++ and are
    not seen by it: 0 calls). `methods`: which of BENCH_METHODS to run ("bucketed": one row per cap).
    """
    from .launch import launch

    methods = tuple(methods)
    if not methods or set(methods) - set(BENCH_METHODS):
        raise ValueError(f"methods must be a non-empty subset of {BENCH_METHODS}, got {methods!r}")
    if "torch_ddp" in methods:
        import torch._dynamo  # noqa: F401 - torch DDP imports it on first use: once here, not in each rank

    for name, v in (("width", width), ("depth", depth), ("batch", batch), ("steps", steps), ("rounds", rounds)):
        _int(name, v)
    _int("warmup", warmup, minimum=0)
    for c in caps:
        bucket_plan([], c)
    rows = launch(_bench_rank, _int("world_size", world_size, minimum=2),
                  args=(width, depth, batch, steps, warmup, rounds, tuple(caps), methods), timeout=600)
    grad_bytes = 4 * depth * (width * width + width)
    return {"rows": rows[0], "grad_bytes": grad_bytes, "world_size": world_size}
