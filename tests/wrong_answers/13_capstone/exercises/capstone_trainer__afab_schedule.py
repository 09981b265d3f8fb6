# loses: breakdown_tests
# why: GPipe (all forwards, then all backwards) instead of 1F1B: every stage holds all m micro-batches
def build_rank(gpt, mesh):
    if len(gpt.blocks) % mesh.pp:
        raise ValueError(f"pp={mesh.pp} must divide the {len(gpt.blocks)} layers")
    return RankStage(gpt, mesh)


def train_step(model, optimizer, batch, mesh, micro_batches):
    x, y = batch
    m = micro_batches
    if x.shape[0] % m:
        raise ValueError(f"micro_batches={m} must divide the replica's batch of {x.shape[0]}")
    optimizer.zero_grad(set_to_none=True)
    xs, ys = list(x.chunk(m)), list(y.chunk(m))
    if mesh.pp == 1:
        losses = []
        for xi, yi in zip(xs, ys):
            loss = cross_entropy(model(xi), yi)
            (loss / m).backward()
            losses.append(float(loss.detach()))
    else:
        stage = PipeStage(model, (x.shape[0] // m, x.shape[1], model.hidden), mesh.pp_group, cross_entropy)
        for i in range(m):
            stage.forward_step(i, xs[i] if stage.is_first else None, ys[i] if stage.is_last else None, m)
        for i in range(m):
            stage.backward_step(i)
        stage.finish()
        losses = [stage.losses[i] for i in range(m)] if stage.is_last else []
        tied = model.tok.weight if mesh.first else (model.head if mesh.last else None)
        if tied is not None:
            dist.all_reduce(tied.grad, group=mesh.embed_group)
    if mesh.dp > 1:
        average_gradients(list(model.parameters()), mesh.dp_group)
    optimizer.step()
    return sum(losses) / m if mesh.last else None


def cross_entropy(logits, y):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


class RankStage(nn.Module):
    def __init__(self, gpt, mesh):
        super().__init__()
        k = len(gpt.blocks) // mesh.pp
        lo, hi = mesh.pp_rank * k, (mesh.pp_rank + 1) * k
        self.first, self.last, self.hidden = mesh.first, mesh.last, gpt.tok.embedding_dim
        self.blocks = nn.ModuleList(TPBlock(b, mesh.tp_group) for b in gpt.blocks[lo:hi])
        if self.first:
            self.tok, self.pos = gpt.tok, gpt.pos
        if self.last:
            self.ln_f = gpt.ln_f
            if not self.first:
                self.head = nn.Parameter(gpt.tok.weight.detach().clone())

    def forward(self, x):
        if self.first:
            x = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for b in self.blocks:
            x = b(x)
        if self.last:
            return F.linear(self.ln_f(x), self.tok.weight if self.first else self.head)
        return x
