# loses: capacity_report_tests
# why: capacity from T / E slots, forgetting that each token makes k assignments
def capacity_report(load, top_k, capacity_factor):
    """Capacity, dropped assignments and the smallest drop-free capacity factor of one routing step."""
    if not isinstance(load, (list, tuple)) or not load:
        raise ValueError(f"load must be a non-empty list of ints, got {load!r}")
    for v in load:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"every load must be an int >= 0, got {v!r}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= len(load):
        raise ValueError(f"top_k must be an int in [1, {len(load)}], got {top_k!r}")
    if isinstance(capacity_factor, bool) or not isinstance(capacity_factor, (int, float)) \
            or not math.isfinite(capacity_factor) or capacity_factor <= 0:
        raise ValueError(f"capacity_factor must be a finite number > 0, got {capacity_factor!r}")
    assignments, n_experts = sum(load), len(load)
    if assignments == 0 or assignments % top_k:
        raise ValueError(f"sum(load) = {assignments} must be a positive multiple of top_k = {top_k}")
    tokens = assignments // top_k
    capacity = math.ceil(capacity_factor * tokens / n_experts)
    dropped = sum(max(0, v - capacity) for v in load)
    return {"tokens": tokens, "capacity": capacity, "dropped": dropped, "drop_fraction": dropped / assignments,
            "min_factor": max(load) / (assignments / n_experts)}
    ### END SOLUTION
