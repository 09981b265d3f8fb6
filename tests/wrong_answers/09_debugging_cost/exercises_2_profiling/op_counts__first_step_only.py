# loses: op_counts_tests
# why: counts inside the first annotation of that name only (one of the profiled steps)
def op_counts(trace, phase):
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
               if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") == phase]
    windows = windows[:1]
    if not windows:
        raise ValueError(f"the trace has no annotation named {phase!r}")
    counts = collections.Counter(e["name"] for e in trace["traceEvents"]
                                 if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                                 and any(a <= e["ts"] < b for a, b in windows))
    return dict(counts)
