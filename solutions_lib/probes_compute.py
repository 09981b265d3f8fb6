"""Scripted machines for the timing exercises of 06 (test machinery, not an answer).

A timing harness cannot be graded on one number measured on a busy machine: every plausible
mistake (no warm-up, one call timed instead of many, the operands created inside the timed
region, the warm-up step timed, a step without its backward) moves a real timing by less than
the noise a shared computer adds. So the hidden tests also run the student's harness on a
*scripted machine*: stand-ins for the `time` and `torch` names of the notebook whose clock moves
only when scripted work happens, by a known amount:

- `ScriptedGemmMachine.modules()` gives `time` (its `perf_counter` ticks in `tick` seconds, like a
  coarse timer) and `torch` (`randn`/`rand`/`empty`/`zeros`/`ones` return shape-only tensors that
  cost `create_cost` seconds per element to make; `torch.mm`, `torch.matmul`, `a @ b`, `a.mm(b)`
  cost 2mnk / flops + overhead; the first multiplication costs `first_call` seconds). A correct
  `time_matmul` returns `seconds_per_call(m, n, k)`; a harness without warm-up (with
  `trials=1`), timing one call (below the clock's tick), or creating the operands inside the timed
  region returns something else by a wide margin.
- `ScriptedTrainingModel(machine)` is a real `nn.Module` (AdamW and cross-entropy work on it) whose
  forward costs `forward` seconds (the first one `first_forward`), whose backward costs `backward`
  and whose optimizer step costs `optimizer_step` (a global step hook, installed by
  `ScriptedTrainingModel.timing()`). A correct `measure_tokens_per_second` returns
  `tokens_per_second(batch, seq_len)`.

Names the answer looks up at call time (`time.perf_counter()`, `torch.mm`) are swapped in its
notebook's globals with `upstream.swapped(globals(), **machine.modules())`; the notebook text says
that the hidden tests do so. Real time still moves the scripted clock, slowed a thousandfold, so
that a harness that never touches the scripted work still terminates.
"""
from __future__ import annotations

import contextlib
import math
import time as _time

import torch as _torch
from torch import nn


class _Clock:
    def __init__(self, tick: float):
        self.tick = float(tick)
        self.offset = 0.0
        self._real0 = _time.perf_counter()

    def advance(self, seconds: float) -> None:
        self.offset += float(seconds)

    def now(self) -> float:
        t = self.offset + (_time.perf_counter() - self._real0) * 1e-3
        return math.floor(t / self.tick) * self.tick if self.tick > 0 else t


class _TimeModule:
    """Stands in for the `time` module: perf_counter, monotonic, time read the scripted clock."""

    def __init__(self, clock: _Clock):
        self._clock = clock

    def perf_counter(self) -> float:
        return self._clock.now()

    monotonic = perf_counter
    time = perf_counter
    process_time = perf_counter

    def perf_counter_ns(self) -> int:
        return int(round(self._clock.now() * 1e9))

    monotonic_ns = perf_counter_ns
    time_ns = perf_counter_ns

    def sleep(self, seconds: float) -> None:
        self._clock.advance(max(0.0, float(seconds)))

    def __getattr__(self, name):
        return getattr(_time, name)


def _shape_of(args, kwargs) -> tuple:
    size = kwargs.get("size")
    if size is None:
        size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, _torch.Size)) else args
    return tuple(int(s) for s in size)


class FakeTensor:
    """A tensor with a shape and nothing else: multiplying two costs scripted time."""

    def __init__(self, machine: "ScriptedGemmMachine", shape: tuple):
        self._machine = machine
        self.shape = _torch.Size(shape)
        self.dtype = _torch.float32

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return len(self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    @property
    def T(self):
        return FakeTensor(self._machine, tuple(reversed(self.shape)))

    def t(self):
        return self.T

    def __matmul__(self, other):
        return self._machine.mm(self, other)

    def mm(self, other):
        return self._machine.mm(self, other)

    matmul = mm

    def __getattr__(self, name):          # .float(), .contiguous(), .to(...), .detach() ...: the same tensor
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: self


class _TorchModule:
    """Stands in for `torch`: creation functions make FakeTensors, mm/matmul are scripted."""

    def __init__(self, machine: "ScriptedGemmMachine"):
        self._machine = machine

    def _make(self, *args, **kwargs):
        shape = _shape_of(args, kwargs)
        self._machine.clock.advance(self._machine.create_cost * math.prod(shape))
        return FakeTensor(self._machine, shape)

    randn = rand = empty = zeros = ones = _make

    def mm(self, a, b, *args, **kwargs):
        return self._machine.mm(a, b)

    matmul = mm

    def __getattr__(self, name):
        return getattr(_torch, name)


class ScriptedGemmMachine:
    """A machine whose GEMMs take a known time (see the module docstring)."""

    def __init__(self, flops: float = 1e9, overhead: float = 1e-4, tick: float = 1e-3, first_call: float = 1.0,
                 create_cost: float = 1e-6):
        self.flops, self.overhead, self.first_call, self.create_cost = float(flops), float(overhead), float(first_call), float(create_cost)
        self.clock = _Clock(tick)
        self.calls = 0

    def seconds_per_call(self, m: int, n: int, k: int) -> float:
        return 2.0 * m * n * k / self.flops + self.overhead

    def mm(self, a, b):
        sa, sb = tuple(a.shape), tuple(b.shape)
        if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0]:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({sa[0]}x{sa[-1]} and {sb[0]}x{sb[-1]})")
        self.calls += 1
        cost = self.first_call if self.calls == 1 else self.seconds_per_call(sa[0], sb[1], sa[1])
        self.clock.advance(cost)
        return FakeTensor(self, (sa[0], sb[1]))

    def modules(self) -> dict:
        """The names to swap into the notebook's globals: {"time": ..., "torch": ...}."""
        return {"time": _TimeModule(self.clock), "torch": _TorchModule(self)}


class _Tick(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, model):
        ctx.model = model
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.model._clock.advance(ctx.model.backward_cost)
        return grad, None


class ScriptedTrainingModel(nn.Module):
    """A tiny real language model whose forward, backward and optimizer step cost scripted time."""

    def __init__(self, vocab: int, forward: float = 0.1, backward: float = 0.2, optimizer_step: float = 0.05,
                 first_forward: float = 2.0, tick: float = 1e-3):
        super().__init__()
        self.emb = nn.Embedding(vocab, 8)
        self.out = nn.Linear(8, vocab)
        self._clock = _Clock(tick)
        self.forward_cost, self.backward_cost, self.step_cost, self.first_forward = forward, backward, optimizer_step, first_forward
        self.forwards = 0

    def forward(self, idx):
        self.forwards += 1
        self._clock.advance(self.first_forward if self.forwards == 1 else self.forward_cost)
        return _Tick.apply(self.out(self.emb(idx)), self)

    def tokens_per_second(self, batch: int, seq_len: int) -> float:
        """What a harness that times only full steps after the warm-up must report."""
        return batch * seq_len / (self.forward_cost + self.backward_cost + self.step_cost)

    def modules(self) -> dict:
        return {"time": _TimeModule(self._clock)}

    @contextlib.contextmanager
    def timing(self):
        """Every optimizer step over this model's parameters costs `optimizer_step` seconds."""
        from torch.optim.optimizer import register_optimizer_step_post_hook

        mine = {id(p) for p in self.parameters()}

        def hook(opt, args, kwargs):
            if any(id(p) in mine for g in opt.param_groups for p in g["params"]):
                self._clock.advance(self.step_cost)

        handle = register_optimizer_step_post_hook(hook)
        try:
            yield self
        finally:
            handle.remove()
