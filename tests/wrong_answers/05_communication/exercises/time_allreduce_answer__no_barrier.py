# loses: time_allreduce_tests
# why: no dist.barrier before the timed calls: one rank's time includes waiting for the other
def time_allreduce(rank, world_size, sizes, repeats, warmup):
    """Per-rank body: for each size in bytes, the median seconds of `repeats` timed all-reduces."""
    out = []
    for size in sizes:
        x = torch.ones(size // 4, dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(x)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            dist.all_reduce(x)
            times.append(time.perf_counter() - t0)
        out.append(float(np.median(times)))
    return out


per_rank = launch(time_allreduce, 2, args=(SIZES, REPEATS, WARMUP))
measured = np.max(np.array(per_rank), axis=0)
for size, t in zip(SIZES, measured):
    print(f"{size:>10} B  {t * 1e3:9.3f} ms  {size / t / 1e9:6.3f} GB/s")
