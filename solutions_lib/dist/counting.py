"""Count the collectives a rank issues: calls and bytes per operation.

    with CommCounter() as comm:
        model(x)                    # code that calls torch.distributed.all_reduce & co.
    comm.calls["all_reduce"], comm.bytes["all_reduce"]

The counter wraps the functions of ``torch.distributed`` (and their home module
``distributed_c10d``) for the duration of the block, so code that calls ``dist.all_reduce``
is counted whatever it names the module. Bytes are those of the full, unsharded buffer the
operation is defined on, the ``S`` of the cost models: all_reduce and broadcast count their
tensor, reduce_scatter its input, all_gather its output; point-to-point operations (send, recv,
isend, irecv, batch_isend_irecv) the tensors they move.
"""
from __future__ import annotations

from collections import Counter

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

__all__ = ["CommCounter"]


def _nbytes(t) -> int:
    if isinstance(t, (list, tuple)):
        return sum(_nbytes(x) for x in t)
    return t.numel() * t.element_size()


# op name -> which argument holds the buffer whose size we count
_SIZED_BY = {
    "all_reduce": lambda a, k: k.get("tensor", a[0] if a else None),
    "broadcast": lambda a, k: k.get("tensor", a[0] if a else None),
    "reduce": lambda a, k: k.get("tensor", a[0] if a else None),
    "reduce_scatter_tensor": lambda a, k: k.get("input", a[1] if len(a) > 1 else None),
    "reduce_scatter": lambda a, k: k.get("input_list", a[1] if len(a) > 1 else None),
    "reduce_scatter_single": lambda a, k: k.get("input", a[1] if len(a) > 1 else None),
    "all_gather_into_tensor": lambda a, k: k.get("output_tensor", a[0] if a else None),
    "all_gather_single": lambda a, k: k.get("output_tensor", a[0] if a else None),
    "all_gather": lambda a, k: k.get("tensor_list", a[0] if a else None),
    "all_to_all_single": lambda a, k: k.get("input", a[1] if len(a) > 1 else None),
    "all_to_all": lambda a, k: k.get("input_tensor_list", a[1] if len(a) > 1 else None),
    "send": lambda a, k: k.get("tensor", a[0] if a else None),
    "recv": lambda a, k: k.get("tensor", a[0] if a else None),
    "isend": lambda a, k: k.get("tensor", a[0] if a else None),
    "irecv": lambda a, k: k.get("tensor", a[0] if a else None),
    # a list of P2POp: the bytes of every tensor it sends or receives
    "batch_isend_irecv": lambda a, k: [op.tensor for op in k.get("p2p_op_list", a[0] if a else [])],
    "barrier": lambda a, k: None,
}


class CommCounter:
    """Context manager: ``calls[op]`` and ``bytes[op]`` for every collective issued inside it."""

    def __init__(self):
        self.calls: Counter = Counter()
        self.bytes: Counter = Counter()
        self._saved: list = []
        self._depth = 0  # a deprecated alias that calls its replacement is counted once

    def _wrap(self, name, fn):
        sized_by = _SIZED_BY[name]

        def counted(*args, **kwargs):
            if self._depth == 0:
                buf = sized_by(args, kwargs)
                self.calls[name] += 1
                self.bytes[name] += _nbytes(buf) if buf is not None else 0
            self._depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth -= 1

        counted.__wrapped__ = fn
        counted.__name__ = name
        return counted

    def __enter__(self):
        for name in _SIZED_BY:
            original = getattr(c10d, name, None)
            if original is None:      # not in this torch version (e.g. reduce_scatter_single in 2.11)
                continue
            wrapped = self._wrap(name, original)
            for mod in (dist, c10d):
                if getattr(mod, name, None) is original:
                    self._saved.append((mod, name, original))
                    setattr(mod, name, wrapped)
        return self

    def __exit__(self, *exc):
        for mod, name, original in reversed(self._saved):
            setattr(mod, name, original)
        self._saved.clear()
        return False

    def summary(self) -> dict[str, tuple[int, int]]:
        """{op: (calls, bytes)} for the operations that were used."""
        return {op: (self.calls[op], self.bytes[op]) for op in sorted(self.calls)}
