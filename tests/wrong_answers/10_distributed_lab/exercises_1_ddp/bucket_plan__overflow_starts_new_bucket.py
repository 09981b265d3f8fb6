# loses: bucket_plan_tests
# why: the tensor that would cross the cap opens a new bucket instead of staying in the one it lands in
import math


def bucket_plan(sizes_bytes, cap_bytes):
    if isinstance(cap_bytes, bool) or not isinstance(cap_bytes, (int, float)) or not math.isfinite(cap_bytes) \
            or cap_bytes <= 0:
        raise ValueError(f"cap_bytes must be a number > 0, got {cap_bytes!r}")
    buckets, current, filled = [], [], 0
    for i, s in enumerate(sizes_bytes):
        if current and filled + s > cap_bytes:
            buckets.append(current)
            current, filled = [], 0
        current.append(i)
        filled += s
    if current:
        buckets.append(current)
    return buckets


def comm_per_step(model, cap_bytes):
    trainable = [p for p in model.parameters() if p.requires_grad]
    sizes = [p.numel() * p.element_size() for p in reversed(trainable)]
    return {"naive_calls": len(trainable), "bucketed_calls": len(bucket_plan(sizes, cap_bytes)),
            "bytes": sum(sizes)}
