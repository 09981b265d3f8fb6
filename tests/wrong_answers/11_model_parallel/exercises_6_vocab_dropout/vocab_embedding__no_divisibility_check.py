# loses: vocab_embedding_validation
# why: an odd split is not refused: with t not dividing V the last V mod t rows belong to no rank, and ids outside [0, V) are not refused either
class VocabParallelEmbedding(nn.Module):
    def __init__(self, embedding):
        super().__init__()
        rank, t = dist.get_rank(), dist.get_world_size()
        V = embedding.num_embeddings
        self.vocab_size = V
        self.start, self.end = rank * (V // t), (rank + 1) * (V // t)
        self.weight = nn.Parameter(embedding.weight.detach()[self.start:self.end].clone())

    def forward(self, tokens):
        mine = (tokens >= self.start) & (tokens < self.end)
        local = torch.where(mine, tokens - self.start, torch.zeros_like(tokens))
        part = F.embedding(local, self.weight) * mine.unsqueeze(-1).to(self.weight.dtype)
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
