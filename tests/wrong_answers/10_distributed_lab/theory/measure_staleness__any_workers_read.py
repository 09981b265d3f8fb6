# loses: measure_staleness_tests
# why: staleness measured from the most recent read of ANY worker, not the writer's own read
def measure_staleness(trace):
    writes, last_read, out = 0, {}, []
    for _, worker, kind in trace:
        if kind == "read":
            last_read = {w: writes for w in set(last_read) | {worker}}
        else:
            out.append(writes - last_read[worker])
            writes += 1
    return out
