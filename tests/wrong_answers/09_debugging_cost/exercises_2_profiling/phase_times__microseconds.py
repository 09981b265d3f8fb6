# loses: phase_times_tests
# why: returns microseconds (the trace's unit), not milliseconds
def phase_times(trace, labels=PHASES):
    out = {label: 0.0 for label in labels}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in out:
            out[e["name"]] += e["dur"]
    return out
