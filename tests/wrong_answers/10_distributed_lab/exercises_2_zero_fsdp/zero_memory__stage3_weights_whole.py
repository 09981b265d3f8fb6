# loses: zero_memory_tests
# why: stage 3 leaves the weights whole (only g + o sharded)
def zero_memory_per_rank(n_params, world_size, stage, weight_bytes=2, grad_bytes=2, optimizer_bytes=12):
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    if world_size < 1 or n_params < 0:
        raise ValueError("world_size must be >= 1 and n_params >= 0")
    w, g, o = weight_bytes, grad_bytes, optimizer_bytes
    sharded = [0, o, g + o, g + o][stage]
    return float(n_params * (w + g + o - sharded) + n_params * sharded / world_size)


lowest_stage_40gb = min(s for s in range(4) if zero_memory_per_rank(7e9, 8, s, 4, 4, 8) + 15e9 <= 40e9)
for s in range(4):
    gb = zero_memory_per_rank(7e9, 8, s, 4, 4, 8) / 1e9
    print(f"stage {s}: {gb:6.1f} GB of model state per rank, {gb + 15:6.1f} GB with 15 GB of activations")
print("lowest stage that fits 40 GB cards:", lowest_stage_40gb)
