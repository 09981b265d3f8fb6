# loses: run_with_hang_timeout_tests
# why: any LaunchError is reported as a hang, also a rank that raised an ordinary error
def run_with_hang_timeout(fn, world_size=2, timeout_s=2.0):
    t0 = time.monotonic()
    try:
        result = launch(fn, world_size, collective_timeout=timeout_s)
        return {"hung": False, "seconds": time.monotonic() - t0, "result": result}
    except LaunchError as e:
        hung = True
        return {"hung": hung, "seconds": time.monotonic() - t0, "result": None}
