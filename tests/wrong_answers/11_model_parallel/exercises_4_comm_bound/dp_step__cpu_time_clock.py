# loses: dp_step_tests
# why: time.process_time() counts this process's CPU time, not the wall-clock time the step takes (a wait, a GPU kernel, a copy by the network stack: none of them is CPU time of this process)
def time_dp_step(net, x, repeats):
    params = list(net.parameters())
    world = dist.get_world_size()
    compute, comm, flat = [], [], None
    for step in range(repeats + 1):
        for p in params:
            p.grad = None
        dist.barrier()
        t0 = time.process_time()
        net(x).square().mean().backward()
        t1 = time.process_time()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.barrier()
        t2 = time.process_time()
        dist.all_reduce(flat)
        t3 = time.process_time()
        flat /= world
        if step:
            compute.append(t1 - t0)
            comm.append(t3 - t2)
    return float(np.median(compute)), float(np.median(comm)), flat
