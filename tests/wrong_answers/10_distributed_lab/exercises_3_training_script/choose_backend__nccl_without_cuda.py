# loses: choose_backend_tests_validation
# why: an explicit 'nccl' request is honoured on a machine without CUDA (init_process_group fails later)
def choose_backend(cuda_available, requested=None):
    if requested is None:
        return "nccl" if cuda_available else "gloo"
    if requested not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl' (or None to choose), got {requested!r}")
    return requested
