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


# --- load-balanced causal chunks: the zig-zag layout (Brandon et al. 2023; Megatron-LM's CP) ---

from solutions_lib.dist.context_parallel import (causal_pairs_per_rank, ring_attention_pairs,  # noqa: E402
                                                 zigzag_indices, zigzag_ring_attention, zigzag_shard,
                                                 zigzag_unshard)

ZS = 16  # sequence length of the zig-zag cases: 2p divides it for p = 2 and 4


def _zigzag_rank(rank, world):
    """Zig-zag and contiguous causal ring attention on this rank; the oracle is torch's SDPA with
    is_causal=True on the whole sequence in this process."""
    g = torch.Generator().manual_seed(11)
    q, k, v, do = (torch.randn(*BH, ZS, D, generator=g, dtype=torch.float64) for _ in range(4))
    ref = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out_full = torch.nn.functional.scaled_dot_product_attention(*ref, is_causal=True)
    out_full.backward(do)
    mine = [zigzag_shard(t, rank, world).requires_grad_(True) for t in (q, k, v)]
    comm, work = Counter(), Counter()
    o = zigzag_ring_attention(*mine, comm=comm, work=work)
    o.backward(zigzag_shard(do, rank, world))
    diffs = [float((o.detach() - zigzag_shard(out_full.detach(), rank, world)).abs().max())]
    diffs += [float((m.grad - zigzag_shard(r.grad, rank, world)).abs().max()) for m, r in zip(mine, ref)]
    contiguous = Counter()
    ring_attention(*[split_sequence(t, rank, world) for t in (q, k, v)], causal=True, work=contiguous)
    return {"diffs": diffs, "comm": dict(comm), "work": dict(work), "contiguous_pairs": contiguous["pairs"],
            "out": o.detach()}


@pytest.mark.parametrize("world", [2, 4])
def test_zigzag_ring_attention_matches_full_causal_attention(world):
    res = launch(_zigzag_rank, world, timeout=60)
    for rank, r in enumerate(res):
        assert max(r["diffs"]) < 1e-10, (rank, r["diffs"])  # output, dq, dk, dv vs SDPA(is_causal=True)
        assert r["comm"] == ring_attention_bytes(BH[0] * BH[1] * (ZS // world) * D, world, 8), r["comm"]
    # the pieces reassemble into the whole output
    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(*BH, ZS, D, generator=g, dtype=torch.float64) for _ in range(3))
    full = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (zigzag_unshard([r["out"] for r in res], world) - full).abs().max() < 1e-10
    # computed score entries per rank (per batch element and head, masked diagonal entries included)
    zig = [r["work"]["pairs"] for r in res]
    cont = [r["contiguous_pairs"] for r in res]
    assert zig == ring_attention_pairs(ZS, world, "zigzag") == [(2 * world + 2) * (ZS // (2 * world)) ** 2] * world
    assert [r["work"]["bwd_pairs"] for r in res] == zig
    assert cont == ring_attention_pairs(ZS, world, "contiguous") == [(r + 1) * (ZS // world) ** 2 for r in range(world)]
    assert max(cont) == world * min(cont)   # contiguous: rank p-1 evaluates p blocks, rank 0 one
    assert max(zig) == min(zig)             # zig-zag: balanced
    assert sum(zig) == sum(cont)            # the same total, (p+1) s^2/(2p): only the distribution changes


def test_zigzag_layout_and_causal_pair_counts_without_ranks():
    assert zigzag_indices(8, 2) == [[0, 1, 6, 7], [2, 3, 4, 5]]
    assert zigzag_indices(16, 4)[1] == [2, 3, 12, 13]
    for s, p in ((8, 1), (12, 2), (24, 3), (32, 4)):
        pos = zigzag_indices(s, p)
        assert sorted(i for ranks in pos for i in ranks) == list(range(s))
        x = torch.randn(2, s, 3, dtype=torch.float64)
        parts = [zigzag_shard(x, r, p) for r in range(p)]
        assert all(torch.equal(parts[r], x[:, pos[r]]) for r in range(p))
        assert torch.equal(zigzag_unshard(parts, p), x)
        # useful causal pairs (key <= query) against a brute-force count over the positions
        n, h = s // p, s // (2 * p)
        brute = {"contiguous": [sum(i + 1 for i in range(r * n, (r + 1) * n)) for r in range(p)],
                 "zigzag": [sum(i + 1 for i in pos[r]) for r in range(p)]}
        for layout in ("contiguous", "zigzag"):
            assert causal_pairs_per_rank(s, p, layout) == brute[layout]
            assert sum(causal_pairs_per_rank(s, p, layout)) == s * (s + 1) // 2
        cont = causal_pairs_per_rank(s, p, "contiguous")
        # contiguous, useful pairs: max/min = 1 + 2 (p-1) n/(n+1), which tends to 2p - 1 (half diagonal blocks)
        assert cont[-1] * (n + 1) == cont[0] * (n + 1 + 2 * (p - 1) * n)
        assert causal_pairs_per_rank(s, p, "zigzag") == [(2 * p - 1) * h * h + h * (h + 1)] * p
        # counting the diagonal block as half a block of n^2: max/min = (p - 1/2) / (1/2) = 2p - 1 exactly
        assert (p - 1 + 0.5) / 0.5 == 2 * p - 1
    assert ring_attention_pairs(12, 3, causal=False) == [48] * 3
    for bad in ((10, 4), (6, 2), (0, 1), (8, 0), (8.0, 2), (True, 1), (8, True)):
        with pytest.raises(ValueError):
            zigzag_indices(*bad)
    with pytest.raises(ValueError, match="layout"):
        causal_pairs_per_rank(8, 2, "striped")
    with pytest.raises(ValueError):
        causal_pairs_per_rank(6, 2, "zigzag")
    assert causal_pairs_per_rank(6, 2, "contiguous") == [6, 15]
    with pytest.raises(ValueError):
        zigzag_shard(torch.zeros(1, 8, 2), 2, 2)
    with pytest.raises(ValueError, match="even"):
        zigzag_ring_attention(*(torch.zeros(1, 3, 2) for _ in range(3)))


def _probe_rank(rank, world):
    import torch.distributed as dist
    from solutions_lib.dist.probes_pipeline import LargestTensor, P2PCounter
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 8, 4, generator=g, dtype=torch.float64) for _ in range(3))
    n = 8 // world
    chunk = lambda t: t[..., rank * n:(rank + 1) * n, :].clone()
    with P2PCounter() as p2p, LargestTensor() as big:
        ring_attention(chunk(q), chunk(k), chunk(v))
    ring = (p2p.sent_bytes, p2p.recv_bytes, p2p.collectives(), big.numel)
    with P2PCounter() as p2p, LargestTensor() as big:     # the whole K, gathered: what the test must catch
        ks = [torch.empty_like(chunk(k)) for _ in range(world)]
        dist.all_gather(ks, chunk(k))
        torch.cat(ks, dim=-2)
    gathered = (p2p.collectives(), big.numel)
    with P2PCounter() as p2p:                               # batch_isend_irecv: bytes split by direction
        buf = torch.empty(3, dtype=torch.float64)
        ops = [dist.P2POp(dist.isend, torch.ones(3, dtype=torch.float64), (rank + 1) % world),
               dist.P2POp(dist.irecv, buf, (rank - 1) % world)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    return ring, gathered, (p2p.sent_calls, p2p.sent_bytes, p2p.recv_calls, p2p.recv_bytes)


def test_probes_measure_ring_traffic_and_the_largest_tensor():
    """The probes of 11 exercises 2's ring tests: point-to-point bytes by direction (also through
    batch_isend_irecv), no collective, and the largest tensor within max(2 c, n x n) for the ring
    but not for a gathered K."""
    world = 4
    for ring, gathered, batch in launch(_probe_rank, world, timeout=60):
        c = 8 * 4 // world
        assert ring[:3] == (2 * (world - 1) * c * 8, 2 * (world - 1) * c * 8, {})
        assert ring[3] <= max(2 * c, (8 // world) ** 2)
        assert gathered[0] == {"all_gather": 1} and gathered[1] == 8 * 4 > 2 * c
        assert batch == (1, 24, 1, 24)
