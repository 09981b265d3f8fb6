# loses: sp_plan_tests
# why: under SP the LayerNorm is not marked SequenceParallel: its gradients stay per-rank partial sums
def parallelize_mlp(mlp, mesh, sequence_parallel=False):
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    if sequence_parallel:
        plan = {"fc1": ColwiseParallel(input_layouts=Shard(1)), "fc2": RowwiseParallel(output_layouts=Shard(1))}
    else:
        plan = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    return parallelize_module(mlp, mesh, plan)
