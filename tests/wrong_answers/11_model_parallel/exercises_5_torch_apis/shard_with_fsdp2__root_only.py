# loses: fsdp2_tests
# why: only the root is wrapped: one unit, one all-gather for the whole model instead of one per Linear
def shard_with_fsdp2(model):
    from torch.distributed.fsdp import fully_shard

    fully_shard(model)
    return model
