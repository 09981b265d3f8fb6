# loses: vocab_cross_entropy_overflow_tests
# why: the classic slip: exp of the raw logits, no shift by the max; right in float64 at small logits, inf in float32 at logits around 150
def vocab_parallel_cross_entropy(logits_shard, targets):
    return _VocabCE.apply(logits_shard, targets)


class _VocabCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets):
        if logits.dim() != 2:
            raise ValueError(f"logits_shard must be (N, V/t), got shape {tuple(logits.shape)}")
        if targets.shape != logits.shape[:1]:
            raise ValueError(f"targets must have shape ({logits.shape[0]},), got {tuple(targets.shape)}")
        rank, t = dist.get_rank(), dist.get_world_size()
        n, k = logits.shape
        if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= t * k):
            raise ValueError(f"targets must lie in [0, {t * k})")
        shifted = logits
        mine = (targets >= rank * k) & (targets < (rank + 1) * k)
        local = torch.where(mine, targets - rank * k, torch.zeros_like(targets))
        target_logit = shifted.gather(1, local.unsqueeze(1)).squeeze(1) * mine
        exp = shifted.exp()
        sum_exp = exp.sum(dim=1)
        dist.all_reduce(sum_exp)
        dist.all_reduce(target_logit)
        softmax = exp / sum_exp.unsqueeze(1)
        ctx.save_for_backward(softmax, local, mine)
        return (sum_exp.log() - target_logit).mean()

    @staticmethod
    def backward(ctx, grad):
        softmax, local, mine = ctx.saved_tensors
        g = softmax.clone()
        g[torch.arange(len(local)), local] -= mine.to(g.dtype)
        return g * grad / len(local), None
