# loses: throughput_tests
# why: the step time taken as the slowest phase, as if the phases overlapped
def throughput(tokens_per_step, phase_seconds):
    if not phase_seconds or any(v < 0 for v in phase_seconds.values()):
        raise ValueError("phase times must be a non-empty dict of seconds >= 0")
    t = float(max(phase_seconds.values()))
    return t, tokens_per_step / t
