"""BucketedDDP's torch-like options: unused_grad_none, broadcast_buffers (with no_sync)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist.ddp import BucketedDDP

pytestmark = pytest.mark.xdist_group("dist_ddp_options")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Linear(4, 4)
        self.rank0_only = nn.Linear(4, 4)     # used on rank 0 only
        self.never = nn.Linear(4, 4)          # used on no rank
        self.register_buffer("stat", torch.zeros(3))

    def forward(self, x, rank):
        h = self.a(x)
        if rank == 0:
            h = h + self.rank0_only(x)
        self.stat += 1                        # a running statistic, like BatchNorm's
        return h


def _rank(rank, world_size, unused_grad_none, broadcast_buffers):
    model = Net()
    ddp = BucketedDDP(model, unused_grad_none=unused_grad_none, broadcast_buffers=broadcast_buffers)
    model.stat.fill_(10.0 * rank)             # ranks drift apart before the forward
    g = torch.Generator().manual_seed(rank)
    xs = [torch.randn(2, 4, generator=g) for _ in range(3)]
    with ddp.no_sync():                        # two accumulated micro-batches, no communication
        with CommCounter() as quiet:
            for x in xs[:2]:
                ddp(x, rank).sum().backward()
    with CommCounter() as c:
        ddp(xs[2], rank).sum().backward()
        ddp.finish()
    return {"grads": {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()},
            "stat": model.stat.clone(), "quiet": quiet.summary(), "comm": c.summary(), "xs": xs}


def _reference(outs):
    """One process: the sum of every rank's three micro-batch losses, / N."""
    model = Net()
    for rank, o in enumerate(outs):
        for x in o["xs"]:
            (model(x, rank).sum() / len(outs)).backward()
    return {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("world_size", [2, 4])
def test_unused_grad_none_and_broadcast_buffers(world_size):
    outs = launch(_rank, world_size, args=(True, True), threads_per_rank=1)
    ref = _reference(outs)
    for rank, o in enumerate(outs):
        assert o["grads"]["never.weight"] is None and o["grads"]["never.bias"] is None
        for n, want in ref.items():
            if want is not None:
                assert torch.allclose(o["grads"][n], want, rtol=1e-6, atol=1e-7), n
        # broadcast before each forward: rank 0's value (0) then + 1 per forward on every rank
        assert o["stat"].tolist() == [3.0] * 3
        # with broadcast_buffers the no_sync forwards broadcast buffers, but reduce nothing
        assert set(o["quiet"]) == {"broadcast"}
        assert o["comm"]["all_reduce"][0] >= 2                    # buckets + the used-flags
    # off (the default): zeros for the never-used parameter, buffers stay per rank
    outs = launch(_rank, world_size, args=(False, False), threads_per_rank=1)
    for rank, o in enumerate(outs):
        assert torch.equal(o["grads"]["never.weight"], torch.zeros(4, 4))
        assert o["stat"].tolist() == [10.0 * rank + 3] * 3
        assert o["quiet"] == {}


def _bad(rank, world_size):
    try:
        BucketedDDP(Net(), unused_grad_none=1)
    except ValueError as e:
        return str(e)


def test_bad_option_is_a_value_error():
    assert all("unused_grad_none" in m for m in launch(_bad, 2, threads_per_rank=1))
