# loses: column_shard_tests
# why: returns the shard in torch.nn.Linear's (out, in) layout although W is stored (in, out)
def column_parallel_shard_shape(in_dim, out_dim, tp):
    """Per-rank shape (in_dim, out_dim // tp) of a column-parallel weight stored (in, out)."""
    for name, v in (("in_dim", in_dim), ("out_dim", out_dim), ("tp", tp)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if out_dim % tp:
        raise ValueError(f"tp={tp} does not divide out_dim={out_dim}")
    return (out_dim // tp, in_dim)


tsx07_shape = column_parallel_shard_shape(4096, 16384, 4)
print("per-rank shard:", tsx07_shape)
