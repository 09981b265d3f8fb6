# loses: overlap_tests
# why: bucket i ready at t_forward + i t_backward / B: bucket 0 would be ready before the backward starts
def overlap_step_time(t_compute, t_comm, overlap=1.0):
    """t_compute + t_comm - overlap * min(t_compute, t_comm) seconds."""
    if t_compute < 0 or t_comm < 0:
        raise ValueError(f"times must be >= 0, got t_compute={t_compute}, t_comm={t_comm}")
    if not 0 <= overlap <= 1:
        raise ValueError(f"overlap must lie in [0, 1], got {overlap}")
    return t_compute + t_comm - overlap * min(t_compute, t_comm)


def bucketed_step_time(t_forward, t_backward, comm_times):
    """End of the last bucket's all-reduce when bucket i is ready at t_forward + (i+1) t_backward / B."""
    if len(comm_times) == 0:
        raise ValueError("comm_times must hold at least one bucket")
    if t_forward < 0 or t_backward < 0 or min(comm_times) < 0:
        raise ValueError("times must be >= 0")
    b = len(comm_times)
    end = 0.0
    for i, c in enumerate(comm_times):
        ready = t_forward + i * t_backward / b
        end = max(ready, end) + c
    return end


from solutions_lib import upstream

def step_with_buckets(k):
    return bucketed_step_time(0.060, 0.120, [upstream.ring_allreduce_time(64, 400e6 / k, 50e-6, 12.5e9)] * k)


steps_by_k = {k: step_with_buckets(k) for k in range(1, 65)}
best_buckets = min(steps_by_k, key=steps_by_k.get)
best_step_time = steps_by_k[best_buckets]
print(f"best: {best_buckets} buckets, step {best_step_time * 1e3:.1f} ms")
