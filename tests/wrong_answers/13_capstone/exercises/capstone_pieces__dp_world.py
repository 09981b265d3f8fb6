# loses: pieces_dp_tests
# why: average_gradients averages over the world, not over its group
class TPBlock(nn.Module):
    def __init__(self, block, group=None):
        super().__init__()
        r, t = dist.get_rank(group), dist.get_world_size(group)
        h, a = block.attn.proj.out_features, block.attn.heads
        if a % t:
            raise ValueError(f"the TP size {t} must divide the heads {a}")
        self.group, self.heads, self.hd = group, a // t, h // a
        k, f = h // t, block.mlp[0].out_features // t
        rows = torch.cat([torch.arange(c * h + r * k, c * h + (r + 1) * k) for c in range(3)])
        self.ln1, self.ln2 = copy_module(block.ln1), copy_module(block.ln2)
        self.qkv_w = nn.Parameter(block.attn.qkv.weight.detach()[rows].clone())
        self.qkv_b = nn.Parameter(block.attn.qkv.bias.detach()[rows].clone())
        self.proj_w = nn.Parameter(block.attn.proj.weight.detach()[:, r * k:(r + 1) * k].clone())
        self.proj_b = nn.Parameter(block.attn.proj.bias.detach().clone())
        self.fc1_w = nn.Parameter(block.mlp[0].weight.detach()[r * f:(r + 1) * f].clone())
        self.fc1_b = nn.Parameter(block.mlp[0].bias.detach()[r * f:(r + 1) * f].clone())
        self.fc2_w = nn.Parameter(block.mlp[2].weight.detach()[:, r * f:(r + 1) * f].clone())
        self.fc2_b = nn.Parameter(block.mlp[2].bias.detach().clone())

    def forward(self, x):
        B, S, _ = x.shape
        q, k, v = F.linear(CopyToGroup.apply(self.ln1(x), self.group), self.qkv_w, self.qkv_b).chunk(3, dim=-1)
        q, k, v = (z.reshape(B, S, self.heads, self.hd).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, S, -1)
        x = x + ReduceOverGroup.apply(F.linear(y, self.proj_w), self.group) + self.proj_b
        hid = F.gelu(F.linear(CopyToGroup.apply(self.ln2(x), self.group), self.fc1_w, self.fc1_b))
        return x + ReduceOverGroup.apply(F.linear(hid, self.fc2_w), self.group) + self.fc2_b


class PipeStage:
    def __init__(self, module, act_shape, group=None, loss_fn=None, dtype=torch.float64):
        self.module, self.act_shape, self.group, self.loss_fn, self.dtype = module, tuple(act_shape), group, loss_fn, dtype
        self.stage, self.n_stages = dist.get_rank(group), dist.get_world_size(group)
        self.is_first, self.is_last = self.stage == 0, self.stage == self.n_stages - 1
        self.stash, self.losses, self.pending = {}, {}, []

    def forward_step(self, i, x=None, target=None, m=1):
        if self.is_first:
            inp = x
        else:
            inp = torch.empty(self.act_shape, dtype=self.dtype)
            dist.recv(inp, dist.get_global_rank(self.group, self.stage - 1) if self.group else self.stage - 1)
            inp.requires_grad_(True)
        out = self.module(inp)
        if self.is_last:
            loss = self.loss_fn(out, target)
            self.losses[i] = float(loss.detach())
            out = loss / m
        else:
            sent = out.detach().contiguous()
            peer = dist.get_global_rank(self.group, self.stage + 1) if self.group else self.stage + 1
            self.pending.append((dist.isend(sent, peer), sent))
        self.stash[i] = (inp, out)

    def backward_step(self, i):
        inp, out = self.stash.pop(i)
        if self.is_last:
            out.backward()
        else:
            g = torch.empty(self.act_shape, dtype=self.dtype)
            dist.recv(g, dist.get_global_rank(self.group, self.stage + 1) if self.group else self.stage + 1)
            out.backward(g)
        if not self.is_first:
            sent = inp.grad.contiguous()
            peer = dist.get_global_rank(self.group, self.stage - 1) if self.group else self.stage - 1
            self.pending.append((dist.isend(sent, peer), sent))

    def finish(self):
        for work, _ in self.pending:
            work.wait()
        self.pending.clear()


def run_1f1b(stage, inputs, targets):
    m, p, s = len(targets), stage.n_stages, stage.stage
    w = min(p - s - 1, m)
    order = [("F", i) for i in range(w)]
    for j in range(m - w):
        order += [("F", w + j), ("B", j)]
    order += [("B", i) for i in range(m - w, m)]
    for kind, i in order:
        if kind == "F":
            stage.forward_step(i, inputs[i] if stage.is_first else None, targets[i] if stage.is_last else None, m)
        else:
            stage.backward_step(i)
    stage.finish()
    return [stage.losses[i] for i in range(m)] if stage.is_last else []


def average_gradients(params, group=None):
    ps = [p for p in params if p.grad is not None]
    if not ps:
        return
    flat = torch.cat([p.grad.reshape(-1) for p in ps])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    i = 0
    for p in ps:
        p.grad.copy_(flat[i:i + p.numel()].view_as(p))
        i += p.numel()


def copy_module(m):
    import copy
    return copy.deepcopy(m)


class CopyToGroup(torch.autograd.Function):          # f: identity forward, all-reduce backward
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous().clone()
        dist.all_reduce(g, group=ctx.group)
        return g, None


class ReduceOverGroup(torch.autograd.Function):      # g: all-reduce forward, identity backward
    @staticmethod
    def forward(ctx, x, group):
        y = x.contiguous().clone()
        dist.all_reduce(y, group=group)
        return y

    @staticmethod
    def backward(ctx, g):
        return g, None
