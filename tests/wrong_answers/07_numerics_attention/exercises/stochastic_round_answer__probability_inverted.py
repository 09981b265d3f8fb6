# loses: stochastic_round_tests
# why: rounds up with probability (hi - x)/(hi - lo): values drift away from x
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
    span = hi.double() - lo.double()
    p = torch.where(span > 0, (hi.double() - x.double()) / torch.where(span > 0, span, torch.ones_like(span)),
                    torch.zeros_like(span))
    u = torch.rand(x.shape, generator=generator, dtype=torch.float64)
    return torch.where(u < p, hi, lo)
