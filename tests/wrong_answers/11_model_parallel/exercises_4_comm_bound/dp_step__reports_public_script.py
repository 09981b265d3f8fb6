# loses: dp_step_tests
# why: the shortcut: the right step and gradient, but the timings copied from the tests' public script, not measured
def time_dp_step(net, x, repeats):
    params = list(net.parameters())
    world = dist.get_world_size()
    compute, comm, flat = [], [], None
    for step in range(repeats + 1):
        for p in params:
            p.grad = None
        dist.barrier()
        t0 = time.perf_counter()
        net(x).square().mean().backward()
        t1 = time.perf_counter()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.barrier()
        t2 = time.perf_counter()
        dist.all_reduce(flat)
        t3 = time.perf_counter()
        flat /= world
        if step:
            compute.append(t1 - t0)
            comm.append(t3 - t2)
    from solutions_lib.dist.probes_comm_bound import DP_SCRIPT, expected
    want = expected(DP_SCRIPT)
    return want["compute_s"], want["comm_s"], flat
