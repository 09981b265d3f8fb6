"""Probes for the tests of 11 exercises 2 (pipeline and context parallelism): they measure, from
outside the student's code, the property each exercise teaches.

    with P2PCounter() as p2p:            # CommCounter, with point-to-point bytes split by direction
        ...
    p2p.sent_calls, p2p.sent_bytes, p2p.recv_calls, p2p.recv_bytes, p2p.collectives()

    watch = ActivationWatch(module)      # weak references to every output of module(...)
    ...; watch.live()                    # how many of those outputs are still alive now

    with LargestTensor() as big:         # every tensor an aten op produces inside the block
        ...
    big.numel                            # the largest one, in elements

`ActivationWatch` counts the micro-batches whose activations a pipeline stage still holds: an
output of the stage's module stays alive while anything (a stash, an autograd graph) refers to
it, and dies when the micro-batch's backward has run and nothing keeps it. It sees only calls
of the module itself (`module(x)`, which runs its forward hooks), not `module.forward(x)`.
`LargestTensor` sees every tensor a torch function or tensor method returns (factories, views
and results alike), so a concatenation of the whole sequence's K or V cannot hide from it.
"""
from __future__ import annotations

import weakref

import torch
from torch.overrides import TorchFunctionMode

from .counting import CommCounter

__all__ = ["P2PCounter", "ActivationWatch", "LargestTensor", "POINT_TO_POINT"]

POINT_TO_POINT = ("send", "recv", "isend", "irecv", "batch_isend_irecv")


def _directions(name, args, kwargs):
    """(direction, tensor) pairs of one point-to-point call: direction 'sent' or 'recv'."""
    if name in ("send", "isend"):
        return [("sent", kwargs.get("tensor", args[0] if args else None))]
    if name in ("recv", "irecv"):
        return [("recv", kwargs.get("tensor", args[0] if args else None))]
    out = []
    for op in kwargs.get("p2p_op_list", args[0] if args else []) or []:
        kind = getattr(getattr(op, "op", None), "__name__", "")
        out.append(("recv" if "recv" in kind else "sent", getattr(op, "tensor", None)))
    return out


class P2PCounter(CommCounter):
    """`CommCounter` that also counts this rank's point-to-point traffic by direction:
    `sent_calls`/`sent_bytes` (send, isend, and the isend ops of batch_isend_irecv) and
    `recv_calls`/`recv_bytes` (recv, irecv, and the irecv ops)."""

    def __enter__(self):
        self.sent_calls = self.sent_bytes = self.recv_calls = self.recv_bytes = 0
        return super().__enter__()

    def _wrap(self, name, fn):
        counted = super()._wrap(name, fn)
        if name not in POINT_TO_POINT:
            return counted

        def directional(*args, **kwargs):
            if self._depth == 0:
                for direction, t in _directions(name, args, kwargs):
                    if isinstance(t, torch.Tensor):
                        setattr(self, direction + "_calls", getattr(self, direction + "_calls") + 1)
                        setattr(self, direction + "_bytes",
                                getattr(self, direction + "_bytes") + t.numel() * t.element_size())
            return counted(*args, **kwargs)

        directional.__wrapped__ = fn
        directional.__name__ = name
        return directional

    def collectives(self) -> dict[str, int]:
        """{op: calls} of every collective (not point-to-point, not barrier) issued in the block."""
        return {op: int(c) for op, c in self.calls.items() if op not in POINT_TO_POINT and c}


class ActivationWatch:
    """Weak references to the outputs of `module(...)` (a forward hook); `live()` counts those
    still alive (reference counting frees them at once; no garbage collection is run, which
would copy the whole heap of a forked rank). `remove()` takes the hook off."""

    def __init__(self, module: torch.nn.Module):
        self.refs: list = []
        self._handle = module.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        if isinstance(output, torch.Tensor):
            self.refs.append(weakref.ref(output))

    @property
    def calls(self) -> int:
        return len(self.refs)

    def live(self) -> int:
        return sum(r() is not None for r in self.refs)

    def remove(self) -> None:
        self._handle.remove()


class LargestTensor(TorchFunctionMode):
    """`numel`: the most elements of any tensor a torch function or tensor method returned
    inside the block (inputs passed in from outside are not counted); `shape`: its shape.
    A torch-function mode, not a dispatch mode: it costs nothing to enter in a forked rank."""

    def __init__(self):
        super().__init__()
        self.numel, self.shape = 0, None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (list, tuple)) else (out,)):
            if isinstance(t, torch.Tensor) and t.numel() > self.numel:
                self.numel, self.shape = t.numel(), tuple(t.shape)
        return out
