# loses: matmul_flops_tests
# why: mkn multiply-adds counted, not 2mkn FLOPs
def matmul_flops(trace, names=MATMUL_OPS):
    flops, seconds = 0, 0.0
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in names:
            dims = e["args"]["Input Dims"]
            first = 1 if e["name"] == "aten::addmm" else 0
            (m, k), (_, n) = dims[first], dims[first + 1]
            flops += m * k * n
            seconds += e["dur"] / 1e6
    return flops, flops / seconds
