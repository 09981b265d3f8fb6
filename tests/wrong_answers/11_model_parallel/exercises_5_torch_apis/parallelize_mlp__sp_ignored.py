# loses: sp_plan_tests
# why: the plain TP plan also for sequence parallelism: fc1 sees only the rank's tokens, all-reduce instead of AG/RS
def parallelize_mlp(mlp, mesh, sequence_parallel=False):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    return parallelize_module(mlp, mesh, plan)
