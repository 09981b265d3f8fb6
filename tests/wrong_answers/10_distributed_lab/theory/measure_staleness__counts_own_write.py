# loses: measure_staleness_tests
# why: off by one: the worker's own write is counted as stale
def measure_staleness(trace):
    writes, last_read, out = 0, {}, []
    for _, worker, kind in trace:
        if kind == "read":
            last_read[worker] = writes
        else:
            out.append(writes - last_read[worker] + 1)
            writes += 1
    return out
