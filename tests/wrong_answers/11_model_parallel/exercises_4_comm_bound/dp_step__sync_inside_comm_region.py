# loses: dp_step_tests
# why: the ranks are synchronised with a one-element all-reduce, but after the clock read that opens the all-reduce's region: the late rank's wait is timed as communication
def time_dp_step(net, x, repeats):
    params = list(net.parameters())
    world = dist.get_world_size()
    compute, comm, flat = [], [], None
    for step in range(repeats + 1):
        for p in params:
            p.grad = None
        t0 = time.perf_counter()
        net(x).square().mean().backward()
        t1 = time.perf_counter()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        t2 = time.perf_counter()
        dist.all_reduce(torch.zeros(1, dtype=flat.dtype))
        dist.all_reduce(flat)
        t3 = time.perf_counter()
        flat /= world
        if step:
            compute.append(t1 - t0)
            comm.append(t3 - t2)
    return float(np.median(compute)), float(np.median(comm)), flat
