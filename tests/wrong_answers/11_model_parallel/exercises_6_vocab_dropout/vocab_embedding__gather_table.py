# loses: vocab_embedding_tests
# why: the shortcut: the table is all-gathered on every forward and the full lookup done locally; right numbers, but the whole V x h table travels
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
        parts = [torch.empty_like(self.weight) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, self.weight.detach())
        parts[dist.get_rank()] = self.weight
        return F.embedding(tokens, torch.cat(parts))
