# loses: choose_backend_tests
# why: the requested backend is ignored: the choice always follows CUDA
def choose_backend(cuda_available, requested=None):
    if requested is None or requested in ("gloo", "nccl"):
        return "nccl" if cuda_available else "gloo"
    if requested not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl' (or None to choose), got {requested!r}")
    if requested == "nccl" and not cuda_available:
        raise ValueError("backend 'nccl' needs CUDA, and this machine has none: use 'gloo' or leave it to choose")
    return requested
