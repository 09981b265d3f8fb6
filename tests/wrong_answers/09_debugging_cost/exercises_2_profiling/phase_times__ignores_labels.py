# loses: phase_times_tests
# why: sums the three default phases whatever labels it is given
def phase_times(trace, labels=PHASES):
    out = {label: 0.0 for label in PHASES}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in out:
            out[e["name"]] += e["dur"] / 1000.0
    return out
