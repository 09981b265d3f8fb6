"""A process group of one rank that believes it has company: for checks of what a constructor
accepts or refuses.

Argument checks of the lab's parallel layers ("the world size must divide out_features") need a
world size but no communication. Launching real ranks for them costs a second per check and, worse,
runs the check inside the student's processes. `FakeWorld(world_size, rank)` initialises
`torch.distributed` with torch's `fake` backend (`torch.testing._internal.distributed.fake_pg`,
torch >= 2.1): `get_world_size()` and `get_rank()` answer as told, and every collective returns
at once and leaves its tensors as they are. Nothing it computes is a real distributed result.

    with FakeWorld(4):
        ColumnParallelLinear(nn.Linear(4, 6))    # raises: 4 does not divide 6

It refuses to start when a process group already exists, and always tears its own down.
"""
from __future__ import annotations

import torch.distributed as dist

__all__ = ["FakeWorld"]


class FakeWorld:
    """`with FakeWorld(world_size, rank=0):` one process, `world_size` ranks as far as the code
    inside can tell, collectives that do nothing."""

    def __init__(self, world_size: int, rank: int = 0):
        for name, v, lo in (("world_size", world_size, 1), ("rank", rank, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        if rank >= world_size:
            raise ValueError(f"rank {rank} is not below world_size {world_size}")
        self.world_size, self.rank = world_size, rank
        self._mine = False

    def __enter__(self) -> "FakeWorld":
        if dist.is_initialized():
            raise RuntimeError("a process group already exists in this process: FakeWorld would replace it")
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", rank=self.rank, world_size=self.world_size, store=FakeStore())
        self._mine = True
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._mine and dist.is_initialized():
            dist.destroy_process_group()
        self._mine = False
        return False

    def __repr__(self) -> str:
        return f"FakeWorld(world_size={self.world_size}, rank={self.rank})"
