# loses: nccl_protocols_tests, nccl_protocols_tests_validation
# why: best_protocol compares all three protocols at the example latencies, not the ones offered in `latencies`
PROTOCOL_EFFICIENCY = {"LL": 4 / 8, "LL128": 120 / 128, "Simple": 1.0}   # structural: payload / bytes on the wire
example_latencies = {"LL": 0.5e-6, "LL128": 2e-6, "Simple": 4e-6}        # illustrative per-step latencies (s)


def protocol_time(op, n, nbytes, bandwidth, protocol, latency):
    """steps(n) * latency + vol(n) * nbytes / (bandwidth * efficiency) seconds (ring algorithms)."""
    steps, vol = _ring_terms(op, n)
    if protocol not in PROTOCOL_EFFICIENCY:
        raise ValueError(f"protocol must be one of {sorted(PROTOCOL_EFFICIENCY)}, got {protocol!r}")
    if nbytes < 0 or latency < 0:
        raise ValueError(f"nbytes and latency must be >= 0, got {nbytes} and {latency}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")
    return steps * latency + vol * nbytes / (bandwidth * PROTOCOL_EFFICIENCY[protocol])


def best_protocol(op, n, nbytes, bandwidth, latencies):
    """The name in `latencies` ({protocol: per-step latency}) with the smallest protocol_time."""
    if not latencies:
        raise ValueError("latencies must name at least one protocol")
    best, best_t = None, math.inf
    for name, lat in example_latencies.items():
        t = protocol_time(op, n, nbytes, bandwidth, name, lat)
        if t < best_t:
            best, best_t = name, t
    return best


def protocol_crossover_bytes(op, n, bandwidth, latencies, a, b):
    """The size (bytes) at which protocols a and b take the same time, clamped at 0."""
    steps, vol = _ring_terms(op, n)
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")
    for name in (a, b):
        if name not in PROTOCOL_EFFICIENCY or name not in latencies:
            raise ValueError(f"{name!r} must be a protocol with an entry in latencies")
    for name, lat in latencies.items():
        if name not in PROTOCOL_EFFICIENCY or lat < 0:
            raise ValueError(f"bad latency entry {name!r}: {lat}")
    if a == b:
        raise ValueError(f"need two different protocols, got {a!r} twice")
    if n == 1:
        return 0.0
    lo, hi = sorted((a, b), key=PROTOCOL_EFFICIENCY.get)
    s = steps * (latencies[hi] - latencies[lo]) * bandwidth / (vol * (1 / PROTOCOL_EFFICIENCY[lo] - 1 / PROTOCOL_EFFICIENCY[hi]))
    return max(0.0, s)


def _ring_terms(op, n):
    if n < 1 or int(n) != n:
        raise ValueError(f"n must be a whole number of ranks >= 1, got {n}")
    if op == "all_reduce":
        return 2 * (n - 1), 2 * (n - 1) / n
    if op in ("reduce_scatter", "all_gather"):
        return n - 1, (n - 1) / n
    raise ValueError(f"op must be 'all_reduce', 'reduce_scatter' or 'all_gather', got {op!r}")


ll_to_ll128 = protocol_crossover_bytes("all_reduce", 8, 50e9, example_latencies, "LL", "LL128")
ll128_to_simple = protocol_crossover_bytes("all_reduce", 8, 50e9, example_latencies, "LL128", "Simple")
print(f"all-reduce on 8 GPUs at 50 GB/s: LL up to {ll_to_ll128 / 1e3:.0f} KB, "
      f"LL128 up to {ll128_to_simple / 1e6:.1f} MB, Simple beyond")
