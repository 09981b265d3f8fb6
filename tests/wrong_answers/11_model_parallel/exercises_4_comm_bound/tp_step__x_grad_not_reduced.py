# loses: tp_step_tests
# why: x's gradient is returned as this rank's backward left it, its shard's part only: f's backward (the all-reduce of x's gradient) is missing
def time_tp_mlp(w1, w2, x, repeats):
    compute, comm, gx = [], [], None
    for step in range(repeats + 1):
        for t in (w1, w2, x):
            t.grad = None
        dist.barrier()
        t0 = time.perf_counter()
        z = torch.nn.functional.gelu(x @ w1.T) @ w2.T
        t1 = time.perf_counter()
        y = z.detach().clone()
        dist.barrier()
        t2 = time.perf_counter()
        dist.all_reduce(y)
        t3 = time.perf_counter()
        dist.barrier()
        t4 = time.perf_counter()
        z.backward(2 * y / y.numel())
        t5 = time.perf_counter()
        gx = x.grad.clone()
        if step:
            compute.append((t1 - t0) + (t5 - t4))
            comm.append(t3 - t2)
    return float(np.median(compute)), float(np.median(comm)), {"w1": w1.grad, "w2": w2.grad, "x": gx}
