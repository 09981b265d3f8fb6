# loses: phase_times_tests
# why: counts every X event of that name, cpu_op included, not only the user_annotation
def phase_times(trace, labels=PHASES):
    out = {label: 0.0 for label in labels}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") in out:
            out[e["name"]] += e["dur"] / 1000.0
    return out
