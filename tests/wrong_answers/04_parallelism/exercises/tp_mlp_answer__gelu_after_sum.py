# loses: tp_mlp_tests
# why: GELU applied after the all-reduce: GELU(sum of partials) is not the MLP
def shard_mlp(W1, b1, W2, rank, world_size):
    """Rank `rank`'s column block of W1 and b1 and row block of W2."""
    n = W1.shape[1]
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    if n % world_size:
        raise ValueError(f"world_size={world_size} must divide the MLP width {n}")
    k = n // world_size
    cols = slice(rank * k, (rank + 1) * k)
    return W1[:, cols].contiguous(), b1[cols].contiguous(), W2[cols, :].contiguous()


def tp_mlp_forward(x, W1_shard, b1_shard, W2_shard, b2):
    """The full MLP output on every rank, with one all-reduce."""
    partial = (x @ W1_shard + b1_shard) @ W2_shard
    dist.all_reduce(partial)
    return F.gelu(partial) + b2
