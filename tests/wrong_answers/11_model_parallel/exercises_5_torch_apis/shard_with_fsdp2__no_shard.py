# loses: fsdp2_tests
# why: the shortcut: returns the model unsharded (a full copy on every rank, gradients not averaged)
def shard_with_fsdp2(model):
    return model
