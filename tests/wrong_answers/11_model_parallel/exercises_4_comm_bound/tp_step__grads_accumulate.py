# loses: tp_step_tests
# why: the gradients of w1, w2 and x are never cleared: every step's backward adds onto the last
def time_tp_mlp(w1, w2, x, repeats):
    compute, comm, gx = [], [], None
    for step in range(repeats + 1):
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
        dist.barrier()
        t6 = time.perf_counter()
        dist.all_reduce(gx)
        t7 = time.perf_counter()
        if step:
            compute.append((t1 - t0) + (t5 - t4))
            comm.append((t3 - t2) + (t7 - t6))
    return float(np.median(compute)), float(np.median(comm)), {"w1": w1.grad, "w2": w2.grad, "x": gx}
