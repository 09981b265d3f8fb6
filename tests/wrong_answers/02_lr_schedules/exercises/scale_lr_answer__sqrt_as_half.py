# loses: scale_lr_tests
# why: square-root rule read as 'half the linear factor'
def scale_lr(base_lr, base_batch, new_batch, rule="linear"):
    """Learning rate for new_batch from one tuned at base_batch: linear or square-root rule."""
    if base_lr <= 0 or base_batch <= 0 or new_batch <= 0:
        raise ValueError(f"learning rate and batch sizes must be positive, got {base_lr}, {base_batch}, {new_batch}")
    ratio = new_batch / base_batch
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * ratio / 2
    raise ValueError(f"rule must be 'linear' or 'sqrt', got {rule!r}")


lr_linear_1024 = scale_lr(3e-4, 256, 1024, "linear")
lr_sqrt_1024 = scale_lr(3e-4, 256, 1024, "sqrt")
print(f"linear rule: {lr_linear_1024:.3g}; square-root rule: {lr_sqrt_1024:.3g}")
