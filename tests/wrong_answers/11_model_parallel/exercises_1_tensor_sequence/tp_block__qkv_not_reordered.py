# loses: tp_block_tests
# why: qkv split as it is: rank 0 gets all of Q and part of K, not [Q_r; K_r; V_r]
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
        self.qkv = ColumnParallelLinear(block.qkv, enter)
        self.proj = RowParallelLinear(block.proj, exit)
        self.fc1 = ColumnParallelLinear(block.fc1, enter)
        self.fc2 = RowParallelLinear(block.fc2, exit)

    def forward(self, x, mask):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        B, S, _ = q.shape
        a, d = self.heads, self.head_dim
        q, k, v = (z.reshape(B, S, a, d).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        att = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, S, a * d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
