# loses: sharding_tests
# why: SHARD_GRAD_OP priced like FULL_SHARD (16P/N): ZeRO-2 keeps the 2-byte weights whole
def sharded_state_gb(n_params, world_size, strategy, shard_group=None):
    """Training state per rank, GB, for 16 bytes/param mixed-precision Adam."""
    if n_params < 0 or world_size < 1:
        raise ValueError("n_params must be >= 0 and world_size >= 1")
    if strategy == "HYBRID_SHARD":
        if shard_group is None or shard_group < 1 or world_size % shard_group:
            raise ValueError(f"HYBRID_SHARD needs a shard_group that divides world_size={world_size}, got {shard_group}")
        return 16 * n_params / shard_group / 1e9
    if shard_group is not None:
        raise ValueError("shard_group only applies to HYBRID_SHARD")
    per_rank = {"NO_SHARD": 16 * n_params, "SHARD_GRAD_OP": 16 * n_params / world_size,
                "FULL_SHARD": 16 * n_params / world_size}
    if strategy not in per_rank:
        raise ValueError(f"unknown strategy {strategy!r}")
    return per_rank[strategy] / 1e9


full_shard_8_gb = sharded_state_gb(13e9, 8, "FULL_SHARD")
full_shard_512_gb = sharded_state_gb(13e9, 512, "FULL_SHARD")
hybrid_512_gb = sharded_state_gb(13e9, 512, "HYBRID_SHARD", shard_group=8)
print(f"{'strategy':>14} {'8 GPUs':>9} {'512 GPUs':>9}   (GB per GPU, 13B params)")
for strat in ("NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD", "HYBRID_SHARD"):
    kw = {"shard_group": 8} if strat == "HYBRID_SHARD" else {}
    print(f"{strat:>14} {sharded_state_gb(13e9, 8, strat, **kw):9.2f} {sharded_state_gb(13e9, 512, strat, **kw):9.2f}")
