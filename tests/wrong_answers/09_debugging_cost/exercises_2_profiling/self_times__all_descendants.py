# loses: self_times_tests
# why: subtracts every open ancestor's time, not only the direct parent's
def self_times(trace):
    threads = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            threads[e.get("tid")].append(e)
    out = collections.defaultdict(float)
    for events in threads.values():
        events = sorted(events, key=lambda e: (e["ts"], -e["dur"]))
        stack, children = [], [0.0] * len(events)
        for i, e in enumerate(events):
            while stack and events[stack[-1]]["ts"] + events[stack[-1]]["dur"] <= e["ts"]:
                stack.pop()
            for j in stack:
                children[j] += e["dur"]
            stack.append(i)
        for e, c in zip(events, children):
            out[e["name"]] += (e["dur"] - c) / 1000.0
    return dict(out)
