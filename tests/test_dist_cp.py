"""Context parallelism: ring attention (solutions_lib.dist.context_parallel) against full attention
in one process (forward and gradients, float64), plus the bytes each rank moves."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from solutions_lib.dist import launch
from solutions_lib.dist.context_parallel import (merge_partials, ring_attention, ring_attention_bytes,
                                                 split_sequence)

pytestmark = pytest.mark.xdist_group("dist_cp")

BH, S, D = (2, 3), 12, 5


def _full(q, k, v, causal):
    s = q @ k.transpose(-2, -1) / D ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def _cp_rank(rank, world):
    return [_cp_case(rank, world, causal) for causal in (True, False)]


def _cp_inputs():
    """Seeded q, k, v and the output gradient do, (*BH, S, D) float64 (also the NCCL test's case)."""
    g = torch.Generator().manual_seed(7)
    return [torch.randn(*BH, S, D, generator=g, dtype=torch.float64) for _ in range(4)]


def _cp_case(rank, world, causal):
    q, k, v, do = _cp_inputs()
    ref = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out_full = _full(*ref, causal)
    out_full.backward(do)
    mine = [split_sequence(t, rank, world).requires_grad_(True) for t in (q, k, v)]
    comm = Counter()
    o = ring_attention(*mine, causal=causal, comm=comm)
    o.backward(split_sequence(do, rank, world))
    diffs = [float((o - split_sequence(out_full.detach(), rank, world)).abs().max())]
    diffs += [float((m.grad - split_sequence(r.grad, rank, world)).abs().max()) for m, r in zip(mine, ref)]
    return diffs, dict(comm)


@pytest.mark.parametrize("world", [2, 4])
def test_ring_attention_matches_full_attention(world):
    per_rank = launch(_cp_rank, world, timeout=60)
    for res in zip(*per_rank):  # causal, then not
        for rank, (diffs, comm) in enumerate(res):
            assert max(diffs) < 1e-12, (rank, diffs)  # output, dq, dk, dv
            assert comm == ring_attention_bytes(BH[0] * BH[1] * (S // world) * D, world, 8), comm


def test_merge_and_formulas_without_ranks():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(4, 6, 3, generator=g, dtype=torch.float64) for _ in range(3))
    s = q @ k.transpose(-2, -1)
    parts = []
    for lo, hi in ((0, 2), (2, 6)):
        lse = torch.logsumexp(s[..., lo:hi], -1)
        parts.append((torch.softmax(s[..., lo:hi], -1) @ v[:, lo:hi], lse))
    o, lse = merge_partials(*parts[0], *parts[1])
    assert torch.allclose(o, torch.softmax(s, -1) @ v, atol=1e-14)
    assert torch.allclose(lse, torch.logsumexp(s, -1), atol=1e-14)
    assert ring_attention_bytes(10, 4, 2, backward=False) == {"recv_bytes": 120, "send_bytes": 120,
                                                               "recv_calls": 3, "send_calls": 3}
    assert ring_attention_bytes(10, 1, 4)["recv_bytes"] == 0
    with pytest.raises(ValueError, match="divide the sequence length"):
        split_sequence(torch.zeros(2, 10, 3), 0, 4)
    with pytest.raises(ValueError, match="one shape"):
        ring_attention(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3), torch.zeros(2, 5, 3))
