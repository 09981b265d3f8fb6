# loses: tp_block_comm_tests
# why: Q, K and V as three column-parallel layers: three f's, 4 all-reduces backward
def _split3(qkv):
    h = qkv.in_features
    out = []
    for c in range(3):
        l = nn.Linear(h, h).to(qkv.weight.dtype)
        with torch.no_grad():
            l.weight.copy_(qkv.weight[c * h:(c + 1) * h])
            l.bias.copy_(qkv.bias[c * h:(c + 1) * h])
        out.append(l)
    return out


class TensorParallelBlock(nn.Module):
    def __init__(self, block, enter=None, exit=None):
        super().__init__()
        t = dist.get_world_size()
        a, h = block.heads, block.proj.out_features
        if a % t:
            raise ValueError(f"the world size {t} must divide the number of heads {a}")
        self.heads, self.head_dim = a // t, h // a
        self.ln1, self.ln2 = copy.deepcopy(block.ln1), copy.deepcopy(block.ln2)
        k = h // t
        rows = torch.cat([torch.arange(c * h + r * k, c * h + (r + 1) * k) for r in range(t) for c in range(3)])
        qkv = nn.Linear(h, 3 * h).to(block.qkv.weight.dtype)
        with torch.no_grad():
            qkv.weight.copy_(block.qkv.weight[rows])
            qkv.bias.copy_(block.qkv.bias[rows])
        self.qkv = ColumnParallelLinear(qkv, enter)
        self.q_, self.k_, self.v_ = (ColumnParallelLinear(l, enter) for l in _split3(block.qkv))
        self.proj = RowParallelLinear(block.proj, exit)
        self.fc1 = ColumnParallelLinear(block.fc1, enter)
        self.fc2 = RowParallelLinear(block.fc2, exit)

    def forward(self, x, mask):
        y = self.ln1(x)
        q, k, v = self.q_(y), self.k_(y), self.v_(y)
        B, S, _ = q.shape
        a, d = self.heads, self.head_dim
        q, k, v = (z.reshape(B, S, a, d).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        att = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, S, a * d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
