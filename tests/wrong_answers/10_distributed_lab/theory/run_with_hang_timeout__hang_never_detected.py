# loses: run_with_hang_timeout_tests
# why: looks for a TimeoutError, but the launcher raises LaunchError: a hang is never reported
def run_with_hang_timeout(fn, world_size=2, timeout_s=2.0):
    t0 = time.monotonic()
    try:
        result = launch(fn, world_size, collective_timeout=timeout_s)
        return {"hung": False, "seconds": time.monotonic() - t0, "result": result}
    except LaunchError as e:
        hung = isinstance(e.__cause__, TimeoutError)
        return {"hung": hung, "seconds": time.monotonic() - t0, "result": None}
