# loses: causal_mask_tests
# why: a 0/1 float mask where a bool mask was asked (masked_fill would treat it wrongly)
def causal_mask(T):
    if int(T) != T or T < 1:
        raise ValueError(f"T must be a whole number >= 1, got {T!r}")
    i = torch.arange(int(T))
    return (i[None, :] <= i[:, None]).float()
