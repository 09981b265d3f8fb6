# loses: self_times_tests
# why: nests events of all threads together: an op on another thread becomes a child
def self_times(trace):
    threads = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            threads[0].append(e)
    out = collections.defaultdict(float)
    for events in threads.values():
        events = sorted(events, key=lambda e: (e["ts"], -e["dur"]))
        stack, children = [], [0.0] * len(events)
        for i, e in enumerate(events):
            while stack and events[stack[-1]]["ts"] + events[stack[-1]]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                children[stack[-1]] += e["dur"]
            stack.append(i)
        for e, c in zip(events, children):
            out[e["name"]] += (e["dur"] - c) / 1000.0
    return dict(out)
