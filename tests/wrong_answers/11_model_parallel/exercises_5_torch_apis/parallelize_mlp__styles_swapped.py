# loses: tp_plan_tests, sp_plan_tests
# why: fc1 row parallel and fc2 column parallel: the wrong split for column-then-row
def parallelize_mlp(mlp, mesh, sequence_parallel=False):
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    if sequence_parallel:
        plan = {"norm": SequenceParallel(), "fc1": RowwiseParallel(input_layouts=Shard(1)),
                "fc2": ColwiseParallel(output_layouts=Shard(1))}
    else:
        plan = {"fc1": RowwiseParallel(), "fc2": ColwiseParallel()}
    return parallelize_module(mlp, mesh, plan)
