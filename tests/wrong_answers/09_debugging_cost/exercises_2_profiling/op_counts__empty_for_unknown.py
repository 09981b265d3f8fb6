# loses: op_counts_tests_validation
# why: returns {} for a phase the trace does not annotate: a typo goes unnoticed
def op_counts(trace, phase):
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
               if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") == phase]
    if not windows:
        return {}
    counts = collections.Counter(e["name"] for e in trace["traceEvents"]
                                 if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                                 and any(a <= e["ts"] < b for a, b in windows))
    return dict(counts)
