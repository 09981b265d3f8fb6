# loses: kahan_tests
# why: stores the compensation in float32: the state between steps is no longer bf16 only
def kahan_bf16_step(param, comp, update):
    """One Kahan-compensated update of bf16 weights: returns (new_param, new_comp), both bf16."""
    for name, t in (("param", param), ("comp", comp)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.bfloat16:
            raise ValueError(f"{name} must be a bfloat16 tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    if not isinstance(update, torch.Tensor) or not update.is_floating_point():
        raise ValueError("update must be a floating-point tensor")
    if param.shape != comp.shape or param.shape != update.shape:
        raise ValueError(f"shapes differ: {tuple(param.shape)}, {tuple(comp.shape)}, {tuple(update.shape)}")
    p32 = param.float()
    y = update.float() - comp.float()
    t = (p32 + y).to(torch.bfloat16)
    return t, (t.float() - p32) - y
