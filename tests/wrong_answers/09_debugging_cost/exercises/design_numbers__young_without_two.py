# loses: design_numbers_tests
# why: Young's interval without the factor 2: sqrt(C M)
def design_numbers(n_params, window_examples, daily_examples, n_gpus, deadline_h, mfu, price, write_bw, mtbf_s,
                   peak_flops=312e12):
    if min(n_params, window_examples, daily_examples, n_gpus, deadline_h, price, write_bw, mtbf_s, peak_flops) <= 0 or not 0 < mfu <= 1:
        raise ValueError("all quantities must be > 0 and mfu in (0, 1]")
    rate = n_gpus * peak_flops * mfu
    state = 16 * n_params
    full_h = 6 * n_params * window_examples / rate / 3600
    inc_h = 6 * n_params * daily_examples / rate / 3600
    return {"state_bytes": state, "full_retrain_hours": full_h, "incremental_hours": inc_h,
            "required_examples_per_s": window_examples / (deadline_h * 3600),
            "daily_cost": n_gpus * inc_h * price,
            "checkpoint_interval_s": math.sqrt(state / write_bw * mtbf_s)}


ch26_23 = design_numbers(500e6, 300e9, 10e9, 32, 6, 0.40, 3.50, 2e9, 24 * 3600)
for k, v in ch26_23.items():
    print(f"{k:<26} {v:,.4g}")
