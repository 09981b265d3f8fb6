# loses: tp_step_tests
# why: a one-element all-reduce synchronises the ranks, but inside the timed communication regions: both all-reduces also time the other rank's lateness
def time_tp_mlp(w1, w2, x, repeats):
    compute, comm, gx = [], [], None
    for step in range(repeats + 1):
        for t in (w1, w2, x):
            t.grad = None
        t0 = time.perf_counter()
        z = torch.nn.functional.gelu(x @ w1.T) @ w2.T
        t1 = time.perf_counter()
        y = z.detach().clone()
        t2 = time.perf_counter()
        dist.all_reduce(torch.zeros(1, dtype=y.dtype))
        dist.all_reduce(y)
        t3 = time.perf_counter()
        t4 = time.perf_counter()
        z.backward(2 * y / y.numel())
        t5 = time.perf_counter()
        gx = x.grad.clone()
        t6 = time.perf_counter()
        dist.all_reduce(torch.zeros(1, dtype=gx.dtype))
        dist.all_reduce(gx)
        t7 = time.perf_counter()
        if step:
            compute.append((t1 - t0) + (t5 - t4))
            comm.append((t3 - t2) + (t7 - t6))
    return float(np.median(compute)), float(np.median(comm)), {"w1": w1.grad, "w2": w2.grad, "x": gx}
