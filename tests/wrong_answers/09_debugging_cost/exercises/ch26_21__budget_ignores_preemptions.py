# loses: ch26_21_tests
# why: the budget's FLOPs ignore the hours lost to preemptions
def option_hours_cost(flops, n_gpus, mfu, price, preemptions_per_day=0.0, lost_hours=0.0, peak_flops=312e12):
    if min(flops, n_gpus, price, peak_flops) <= 0 or not 0 < mfu <= 1 or preemptions_per_day * lost_hours >= 24:
        raise ValueError("bad arguments")
    t = flops / (n_gpus * peak_flops * mfu) / 3600
    # assumption: preemptions strike during recomputation too, so the wall-clock solves
    # W = T + (r W / 24) L, i.e. W = T / (1 - r L / 24)
    wall = t / (1 - preemptions_per_day * lost_hours / 24)
    return wall, n_gpus * wall * price


def flops_in_budget(budget, n_gpus, mfu, price, preemptions_per_day=0.0, lost_hours=0.0, peak_flops=312e12):
    useful = 1.0
    return budget / price * 3600 * peak_flops * mfu * useful


ch26_21 = {}
ch26_21["A"] = option_hours_cost(1e21, 32, 0.45, 3.50)
ch26_21["B"] = option_hours_cost(1e21, 128, 0.35, 1.10, 2, 1.0)
ch26_21["A_budget_flops"] = flops_in_budget(50_000, 32, 0.45, 3.50)
ch26_21["B_budget_flops"] = flops_in_budget(50_000, 128, 0.35, 1.10, 2, 1.0)
more_compute = "B" if ch26_21["B_budget_flops"] > ch26_21["A_budget_flops"] else "A"
for k in ("A", "B"):
    print(f"option {k}: {ch26_21[k][0]:.1f} h wall-clock, ${ch26_21[k][1]:,.0f}; "
          f"$50k buys {ch26_21[k + '_budget_flops']:.2e} FLOPs")
