# loses: ch26_04_c_tests
# why: speedup_after scales by new / old: a shorter step lowers the speedup
def speedup_after(old_speedup, old_step, new_step):
    """old_speedup * old_step / new_step: same baseline, shorter step."""
    if old_speedup <= 0 or old_step <= 0 or new_step <= 0:
        raise ValueError("speedup and step times must be > 0")
    return old_speedup * new_step / old_step


T_OLD = 260.0
t_overlap = 60 + 120 + 45 / 4 + 25 + 10
speedup_overlap = speedup_after(2.8, T_OLD, t_overlap)
t_prefetch = T_OLD - 25
speedup_prefetch = speedup_after(2.8, T_OLD, t_prefetch)
t_bf16 = T_OLD - 45 / 2
speedup_bf16 = speedup_after(2.8, T_OLD, t_bf16)
t_both = t_overlap - 25
speedup_both = speedup_after(2.8, T_OLD, t_both)
bound_4_baseline = 2.8 * T_OLD / (10 + (2.8 * T_OLD - 10) / 4)
for name, t, s in [("overlap", t_overlap, speedup_overlap), ("prefetch", t_prefetch, speedup_prefetch),
                   ("bf16 grads", t_bf16, speedup_bf16), ("overlap + prefetch", t_both, speedup_both)]:
    print(f"{name:>18}: step {t:6.2f} ms -> speedup {s:.2f}x ({s / 4:.0%} efficiency)")
print(f"Amdahl bound on the same 728 ms baseline: {bound_4_baseline:.2f}x")
