# loses: bus_bandwidth_tests
# why: divides algbw by the factor instead of multiplying
from solutions_lib import upstream

def bus_bandwidth(op, nbytes, seconds, n):
    """algbw = nbytes / seconds times the nccl-tests factor of `op` (bytes/s)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if seconds <= 0 or nbytes < 0:
        raise ValueError("seconds must be > 0 and nbytes >= 0")
    factors = {"all_reduce": 2 * (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_gather": (n - 1) / n,
               "broadcast": 1.0, "reduce": 1.0}
    if op not in factors:
        raise ValueError(f"op must be one of {sorted(factors)}, got {op!r}")
    return nbytes / seconds / factors[op] if factors[op] else 0.0


busbw_measured = np.array([bus_bandwidth("all_reduce", s, t, 2) for s, t in zip(SIZES, measured)])
peak_busbw = float(busbw_measured.max())
busbw_8_nvlink = bus_bandwidth("all_reduce", GRAD_BYTES, upstream.ring_allreduce_time(8, GRAD_BYTES, ALPHA, 50e9), 8)
print(f"peak bus bandwidth measured here: {peak_busbw / 1e9:.2f} GB/s; "
      f"modelled 8-GPU NVLink all-reduce: {busbw_8_nvlink / 1e9:.1f} GB/s")
