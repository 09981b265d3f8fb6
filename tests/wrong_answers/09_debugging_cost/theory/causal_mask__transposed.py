# loses: causal_mask_tests
# why: the upper triangle: every query sees the future
def causal_mask(T):
    if int(T) != T or T < 1:
        raise ValueError(f"T must be a whole number >= 1, got {T!r}")
    i = torch.arange(int(T))
    return i[None, :] >= i[:, None]
