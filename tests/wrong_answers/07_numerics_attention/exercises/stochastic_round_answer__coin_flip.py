# loses: stochastic_round_tests
# why: rounds up with probability 1/2 whatever the distance: random but biased
def stochastic_round_bf16(x, generator):
    """Round float32 values to bf16 up or down at random, so that E[result] = x."""
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise ValueError(f"x must be a float32 tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if not torch.isfinite(x).all():
        raise ValueError("x must be finite")
    n = x.to(torch.bfloat16)
    lo = torch.where(n.float() > x, torch.nextafter(n, torch.full_like(n, float("-inf"))), n)
    hi = torch.where(n.float() < x, torch.nextafter(n, torch.full_like(n, float("inf"))), n)
    u = torch.rand(x.shape, generator=generator)
    return torch.where(u < 0.5, hi, lo)
