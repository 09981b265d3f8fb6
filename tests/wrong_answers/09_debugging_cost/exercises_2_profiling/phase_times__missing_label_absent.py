# loses: phase_times_tests
# why: a label that never occurs is left out instead of 0.0
def phase_times(trace, labels=PHASES):
    out = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in labels:
            out[e["name"]] = out.get(e["name"], 0.0) + e["dur"] / 1000.0
    return out
