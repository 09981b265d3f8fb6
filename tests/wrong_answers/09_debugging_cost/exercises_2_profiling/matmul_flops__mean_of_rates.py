# loses: matmul_flops_tests
# why: FLOP/s as the mean of the per-event rates instead of total FLOPs over total time
def matmul_flops(trace, names=MATMUL_OPS):
    flops, seconds, rates = 0, 0.0, []
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in names:
            dims = e["args"]["Input Dims"]
            first = 1 if e["name"] == "aten::addmm" else 0
            (m, k), (_, n) = dims[first], dims[first + 1]
            flops += 2 * m * k * n
            rates.append(2 * m * k * n / (e["dur"] / 1e6))
            seconds += e["dur"] / 1e6
    return flops, sum(rates) / len(rates)
