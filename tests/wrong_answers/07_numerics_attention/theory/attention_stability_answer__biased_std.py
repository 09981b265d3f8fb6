# loses: attention_stability_tests
# why: score_std with the biased (population) std, not torch's default
def stable_softmax(x):
    """softmax over the last dimension with the row max subtracted first."""
    z = x - x.max(dim=-1, keepdim=True).values
    e = torch.exp(z)
    return e / e.sum(dim=-1, keepdim=True)


def attention_saturation(q, k, scaled):
    """score_std, max_prob and entropy of softmax(q k^T [/ sqrt(d)])."""
    s = q @ k.T
    if scaled:
        s = s / math.sqrt(q.shape[-1])
    p = stable_softmax(s)
    z = s - s.max(dim=-1, keepdim=True).values
    logp = z - torch.log(torch.exp(z).sum(dim=-1, keepdim=True))
    entropy = -(p * logp).sum(dim=-1)
    return {"score_std": float(s.std(unbiased=False)), "max_prob": float(p.max(dim=-1).values.mean()),
            "entropy": float(entropy.mean())}


print(stable_softmax(torch.tensor([[1000.0, 999.0, 990.0]])))
qq, kk = torch.randn(128, 256, dtype=torch.float64), torch.randn(128, 256, dtype=torch.float64)
print("unscaled:", attention_saturation(qq, kk, False))
print("scaled  :", attention_saturation(qq, kk, True))
