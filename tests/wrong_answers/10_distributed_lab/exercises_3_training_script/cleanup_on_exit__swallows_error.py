# loses: cleanup_on_exit_tests
# why: the exception is caught and printed, and None returned: the job exits 0 after a failure
def cleanup_on_exit(fn, *args, **kwargs):
    try:
        result = fn(*args, **kwargs)
        dist.barrier()
        return result
    except Exception as e:
        print("training failed:", e)
        return None
    finally:
        dist.destroy_process_group()
