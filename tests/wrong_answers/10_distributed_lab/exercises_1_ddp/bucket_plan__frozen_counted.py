# loses: comm_per_step_tests
# why: comm_per_step counts frozen parameters too (they are never sent)
import math


def bucket_plan(sizes_bytes, cap_bytes):
    if isinstance(cap_bytes, bool) or not isinstance(cap_bytes, (int, float)) or not math.isfinite(cap_bytes) \
            or cap_bytes <= 0:
        raise ValueError(f"cap_bytes must be a number > 0, got {cap_bytes!r}")
    buckets, current, filled = [], [], 0
    for i, s in enumerate(sizes_bytes):
        current.append(i)
        filled += s
        if filled >= cap_bytes:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


def comm_per_step(model, cap_bytes):
    trainable = list(model.parameters())
    sizes = [p.numel() * p.element_size() for p in reversed(trainable)]
    return {"naive_calls": len(trainable), "bucketed_calls": len(bucket_plan(sizes, cap_bytes)),
            "bytes": sum(sizes)}
