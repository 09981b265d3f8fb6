# loses: zero_per_rank_tests
# why: the shortcut: calls the course library's zero_bytes_per_rank
def zero_per_rank(n_params, world_size, stage, weight_bytes=2, grad_bytes=2, optimizer_bytes=12):
    """Model-state bytes per data-parallel rank under ZeRO stage 0, 1, 2 or 3."""
    if stage not in (0, 1, 2, 3) or isinstance(stage, bool):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    if not world_size >= 1:
        raise ValueError(f"world_size must be at least 1 rank, got {world_size}")
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params}")
    if min(weight_bytes, grad_bytes, optimizer_bytes) < 0:
        raise ValueError("bytes per parameter must be >= 0")
    from solutions_lib.memory import zero_bytes_per_rank
    return zero_bytes_per_rank(n_params, world_size, stage, weight_bytes, grad_bytes, optimizer_bytes)
