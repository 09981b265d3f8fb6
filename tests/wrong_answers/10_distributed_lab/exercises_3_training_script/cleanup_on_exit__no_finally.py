# loses: cleanup_on_exit_tests
# why: the group is destroyed only on success: after an exception it stays initialised
def cleanup_on_exit(fn, *args, **kwargs):
    result = fn(*args, **kwargs)
    dist.barrier()
    dist.destroy_process_group()
    return result
