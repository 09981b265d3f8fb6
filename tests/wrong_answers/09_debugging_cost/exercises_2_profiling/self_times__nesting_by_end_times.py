# loses: self_times_tests
# why: nesting decided by comparing ends (ts + dur): at real timestamps a child that ends with its parent has a computed end past the parent's, so it loses its parent
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
            # nesting decided by end times: pop while the child would end after the top's end
            while stack and e["ts"] + e["dur"] > events[stack[-1]]["ts"] + events[stack[-1]]["dur"]:
                stack.pop()
            if stack:
                children[stack[-1]] += e["dur"]
            stack.append(i)
        for e, c in zip(events, children):
            out[e["name"]] += (e["dur"] - c) / 1000.0
    return dict(out)
