# loses: matmul_flops_tests
# why: always counts aten::mm and aten::addmm, whatever names it is given
def matmul_flops(trace, names=MATMUL_OPS):
    flops, seconds = 0, 0.0
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in MATMUL_OPS:
            dims = e["args"]["Input Dims"]
            first = 1 if e["name"] == "aten::addmm" else 0
            (m, k), (_, n) = dims[first], dims[first + 1]
            flops += 2 * m * k * n
            seconds += e["dur"] / 1e6
    return flops, flops / seconds
