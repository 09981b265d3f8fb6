# loses: vocab_cross_entropy_tests
# why: the shortcut: all-gather the (N, V) logits and call F.cross_entropy; right loss and gradient, but N x V numbers sent and held on every rank
def vocab_parallel_cross_entropy(logits_shard, targets):
    if logits_shard.dim() != 2:
        raise ValueError(f"logits_shard must be (N, V/t), got shape {tuple(logits_shard.shape)}")
    if targets.shape != logits_shard.shape[:1]:
        raise ValueError(f"targets must have shape ({logits_shard.shape[0]},), got {tuple(targets.shape)}")
    rank, t = dist.get_rank(), dist.get_world_size()
    n, k = logits_shard.shape
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= t * k):
        raise ValueError(f"targets must lie in [0, {t * k})")
    parts = [torch.empty_like(logits_shard) for _ in range(t)]
    dist.all_gather(parts, logits_shard.detach().contiguous())
    parts[rank] = logits_shard
    return F.cross_entropy(torch.cat(parts, dim=1), targets)
