# loses: throughput_tests
# why: only the compute phases counted: data loading and checkpoint time left out of T_step
def throughput(tokens_per_step, phase_seconds):
    if not phase_seconds or any(v < 0 for v in phase_seconds.values()):
        raise ValueError("phase times must be a non-empty dict of seconds >= 0")
    t = float(sum(v for k, v in phase_seconds.items() if k in ('forward', 'backward', 'optimizer', 'comm')))
    return t, tokens_per_step / t
