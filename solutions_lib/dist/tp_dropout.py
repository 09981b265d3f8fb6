"""Dropout random numbers under tensor parallelism (Megatron-LM's RNG tracker, in small).

A tensor-parallel rank holds two kinds of activations. *Replicated* ones (the block's output after
the row-parallel all-reduce, the residual stream, anything outside the TP region) are the same
tensor on every TP rank: their dropout mask must be the same on every TP rank too, or the copies
drift apart and the next layer sees a different input on each rank. *Sharded* ones (the attention
probabilities of the rank's heads, the MLP's hidden slice) are different pieces of one tensor:
their masks must be independent across TP ranks, or every head drops the same positions. Across
data-parallel replicas (different micro-batches) both must differ, or the noise is correlated over
the global batch. Megatron keeps a second RNG state seeded per TP rank and swaps it in with
`get_cuda_rng_tracker().fork()` around the sharded regions (Shoeybi et al. 2019, section 3).

    rng = TPDropoutRNG(base_seed=1234, dp_rank=d, tp_rank=t)
    with rng.fork("sharded"):
        probs = F.dropout(probs, p)          # different on each TP rank
    with rng.fork("replicated"):
        out = F.dropout(out, p)              # the same on every TP rank of this replica

Inside a block torch's default CPU generator draws from the region's stream; the stream carries on
from where it stopped at the next `fork` of that region, and the default generator is left as if
the block had never drawn.
"""
from __future__ import annotations

import contextlib

import torch

__all__ = ["TPDropoutRNG"]

REGIONS = ("replicated", "sharded")


class TPDropoutRNG:
    """Two random streams per rank: one shared by the TP group ("replicated"), one per TP rank ("sharded")."""

    def __init__(self, base_seed: int, dp_rank: int, tp_rank: int):
        for name, v in (("base_seed", base_seed), ("dp_rank", dp_rank), ("tp_rank", tp_rank)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        # distinct seeds for distinct streams: a seed sequence keyed by (base, region, dp[, tp])
        seeds = {"replicated": hash((base_seed, 0, dp_rank)) & (2 ** 62 - 1),
                 "sharded": hash((base_seed, 1, dp_rank, tp_rank)) & (2 ** 62 - 1)}
        self._states = {r: torch.Generator().manual_seed(s).get_state() for r, s in seeds.items()}

    @contextlib.contextmanager
    def fork(self, region: str):
        """Draw from `region`'s stream inside the block; restore the default generator after it."""
        if region not in REGIONS:
            raise ValueError(f"region must be one of {REGIONS}, got {region!r}")
        outside = torch.get_rng_state()
        torch.set_rng_state(self._states[region])
        try:
            yield
        finally:
            self._states[region] = torch.get_rng_state()
            torch.set_rng_state(outside)
