# loses: run_with_hang_timeout_tests
# why: launch() with its default 30 s collective timeout (the hang runs until the sleeping rank returns); the seconds it reports are timeout_s, not measured
def run_with_hang_timeout(fn, world_size=2, timeout_s=2.0):
    t0 = time.monotonic()
    try:
        result = launch(fn, world_size)
        return {"hung": False, "seconds": timeout_s, "result": result}
    except LaunchError as e:
        hung = "timed out" in str(e).lower()
        return {"hung": True, "seconds": timeout_s, "result": None}
