# loses: self_times_tests
# why: sorts by start time only: at equal starts a shorter event listed first becomes the parent
def self_times(trace):
    threads = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            threads[e.get("tid")].append(e)
    out = collections.defaultdict(float)
    for events in threads.values():
        events = sorted(events, key=lambda e: e["ts"])
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
