# loses: throughput_tests
# why: the mean of the phases instead of their sum
def throughput(tokens_per_step, phase_seconds):
    if not phase_seconds or any(v < 0 for v in phase_seconds.values()):
        raise ValueError("phase times must be a non-empty dict of seconds >= 0")
    t = float(sum(phase_seconds.values())) / len(phase_seconds)
    return t, tokens_per_step / t
