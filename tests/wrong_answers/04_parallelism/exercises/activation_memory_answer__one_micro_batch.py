# loses: activation_memory_tests
# why: 1F1B assumed to hold one micro-batch at a time (A): the first stage holds min(N, M) during the warm-up
def peak_activation_memory(N, M, A, schedule):
    """Peak activation memory (units of A) a stage holds: GPipe M A, 1F1B min(N, M) A."""
    if N < 1 or M < 1 or A < 0:
        raise ValueError(f"need N >= 1, M >= 1, A >= 0; got N={N}, M={M}, A={A}")
    if schedule == "gpipe":
        return M * A
    if schedule == "1f1b":
        return A
    raise ValueError(f"schedule must be 'gpipe' or '1f1b', got {schedule!r}")


gpipe_max_m = int(30 // 1.5)
gpipe_best_bubble = (8 - 1) / (8 + gpipe_max_m - 1)
onef1b_m_10pct = 9 * (8 - 1) + 1          # 7 / (M + 7) < 0.1  <=>  M > 63
onef1b_peak_gb = peak_activation_memory(8, onef1b_m_10pct, 1.5, "1f1b")
print(f"GPipe: at most M = {gpipe_max_m}, bubble {gpipe_best_bubble:.3f}; "
      f"1F1B: M = {onef1b_m_10pct} for < 10%, peak {onef1b_peak_gb} GB")
