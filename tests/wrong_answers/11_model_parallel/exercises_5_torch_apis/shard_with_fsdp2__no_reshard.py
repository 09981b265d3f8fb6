# loses: fsdp2_tests
# why: reshard_after_forward=False keeps the gathered parameters (ZeRO-2 style): no all-gather in the backward
def shard_with_fsdp2(model):
    from torch.distributed.fsdp import fully_shard

    for module in model.modules():
        if isinstance(module, nn.Linear):
            fully_shard(module, reshard_after_forward=False)
    fully_shard(model, reshard_after_forward=False)
    return model
