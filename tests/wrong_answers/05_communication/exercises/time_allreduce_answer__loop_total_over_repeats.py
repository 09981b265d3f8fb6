# loses: time_allreduce_tests
# why: times the whole loop of repeats once and divides by the count (a mean, barriers inside the timed region)
def time_allreduce(rank, world_size, sizes, repeats, warmup):
    """Per-rank body: for each size in bytes, the median seconds of `repeats` timed all-reduces."""
    out = []
    for size in sizes:
        x = torch.ones(size // 4, dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(x)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(repeats):
            dist.barrier()
            dist.all_reduce(x)
        out.append((time.perf_counter() - t0) / repeats)
    return out


per_rank = launch(time_allreduce, 2, args=(SIZES, REPEATS, WARMUP))
measured = np.max(np.array(per_rank), axis=0)
for size, t in zip(SIZES, measured):
    print(f"{size:>10} B  {t * 1e3:9.3f} ms  {size / t / 1e9:6.3f} GB/s")
