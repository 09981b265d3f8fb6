# loses: fsdp2_tests
# why: walks model.children(), so the nested Sequential becomes one unit (2 units, not 3)
def shard_with_fsdp2(model):
    from torch.distributed.fsdp import fully_shard

    for module in model.children():
        if isinstance(module, (nn.Linear, nn.Sequential)):
            fully_shard(module)
    fully_shard(model)
    return model
