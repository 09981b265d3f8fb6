# loses: measure_staleness_tests
# why: counts every trace event since the read (reads too), not the writes
def measure_staleness(trace):
    writes, last_read, out = 0, {}, []
    for i, (_, worker, kind) in enumerate(trace):
        if kind == "read":
            last_read[worker] = i
        else:
            out.append(i - last_read[worker] - 1)
            writes += 1
    return out
