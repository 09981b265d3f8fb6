# loses: dp_step_tests
# why: the gradients are never cleared, so each step's backward adds onto the last: the returned gradient is repeats + 1 steps' sum
def time_dp_step(net, x, repeats):
    params = list(net.parameters())
    world = dist.get_world_size()
    compute, comm, flat = [], [], None
    for step in range(repeats + 1):
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
    return float(np.median(compute)), float(np.median(comm)), flat
