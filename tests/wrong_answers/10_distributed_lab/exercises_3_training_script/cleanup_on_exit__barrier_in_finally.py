# loses: cleanup_on_exit_tests
# why: the barrier sits in the finally block, so it runs after an error too (a crashed peer never arrives)
def cleanup_on_exit(fn, *args, **kwargs):
    try:
        result = fn(*args, **kwargs)
        return result
    finally:
        dist.barrier()
        dist.destroy_process_group()
