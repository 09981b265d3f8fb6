# loses: vocab_embedding_tests
# why: the classic slip: ids outside the rank's rows are clamped into range but their rows are not zeroed, so the sum over ranks adds wrong rows
class VocabParallelEmbedding(nn.Module):
    def __init__(self, embedding):
        super().__init__()
        rank, t = dist.get_rank(), dist.get_world_size()
        V = embedding.num_embeddings
        if V % t:
            raise ValueError(f"the tensor-parallel size {t} must divide the vocabulary size {V}")
        self.vocab_size = V
        self.start, self.end = rank * (V // t), (rank + 1) * (V // t)
        self.weight = nn.Parameter(embedding.weight.detach()[self.start:self.end].clone())

    def forward(self, tokens):
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size})")
        local = (tokens - self.start).clamp(0, self.end - self.start - 1)
        part = F.embedding(local, self.weight)
        return _SumOverTP.apply(part)


class _SumOverTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.clone()
        dist.all_reduce(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad
