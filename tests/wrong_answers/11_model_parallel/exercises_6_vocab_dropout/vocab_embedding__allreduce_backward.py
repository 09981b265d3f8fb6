# loses: vocab_embedding_tests
# why: the sum over ranks uses torch.distributed.nn.functional.all_reduce, which all-reduces the (replicated) gradient too: t times the true gradient, and twice the bytes
import torch.distributed.nn.functional as dist_nn


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
        mine = (tokens >= self.start) & (tokens < self.end)
        local = torch.where(mine, tokens - self.start, torch.zeros_like(tokens))
        part = F.embedding(local, self.weight) * mine.unsqueeze(-1).to(self.weight.dtype)
        return dist_nn.all_reduce(part)
