# loses: memory_peak_tests
# why: takes the last event that reaches the peak, not the first
def memory_peak(trace, phases=PHASES):
    mem = sorted((e for e in trace["traceEvents"] if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    best = None
    for e in mem:
        if best is None or e["args"]["Total Allocated"] >= best["args"]["Total Allocated"]:
            best = e
    phase = None
    for e in trace["traceEvents"]:
        if (e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in phases
                and e["ts"] <= best["ts"] < e["ts"] + e["dur"]):
            phase = e["name"]
    return best["args"]["Total Allocated"], phase
