# loses: stochastic_round_tests
# why: draws the noise from torch's global generator, ignoring the one passed in: not reproducible
def stochastic_round_bf16(x, generator):
    """Round float32 values to bf16 up or down at random, so that E[result] = x."""
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise ValueError(f"x must be a float32 tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if not torch.isfinite(x).all():
        raise ValueError("x must be finite")
    bits = x.contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, x.shape, dtype=torch.int32)
    return ((bits + noise) & -65536).view(torch.float32).to(torch.bfloat16)
