# loses: choose_backend_tests
# why: cuda_available is compared with `is True`, so a truthy 1 picks gloo
def choose_backend(cuda_available, requested=None):
    if requested is None:
        return "nccl" if cuda_available is True else "gloo"
    if requested not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl' (or None to choose), got {requested!r}")
    if requested == "nccl" and not cuda_available:
        raise ValueError("backend 'nccl' needs CUDA, and this machine has none: use 'gloo' or leave it to choose")
    return requested
