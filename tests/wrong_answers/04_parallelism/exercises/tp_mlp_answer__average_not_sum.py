# loses: tp_mlp_tests
# why: averages the partial outputs like DDP gradients: the row-parallel product needs their sum
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
    z = F.gelu(x @ W1_shard + b1_shard)   # complete columns: GELU is exact locally
    partial = z @ W2_shard                # a partial sum of Y
    dist.all_reduce(partial)              # sum over ranks (in place)
    partial /= dist.get_world_size()
    return partial + b2                   # b2 once, after the sum
