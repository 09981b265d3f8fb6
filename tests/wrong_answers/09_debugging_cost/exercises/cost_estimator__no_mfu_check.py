# loses: cost_estimator_tests_validation
# why: accepts an MFU above 1
class CostEstimator:
    def __init__(self, n_params, n_tokens, n_gpus, mfu, peak_flops=312e12, price_per_gpu_hour=3.50,
                 spot_discount=0.65, lost_hours_per_preemption=0.5):
        if min(n_params, n_tokens, n_gpus, peak_flops, price_per_gpu_hour) <= 0:
            raise ValueError("sizes, GPU count, peak and price must be > 0")
        if not 0 < mfu or not 0 <= spot_discount < 1 or lost_hours_per_preemption < 0:
            raise ValueError("mfu in (0, 1], spot_discount in [0, 1), lost hours >= 0")
        self.N, self.D, self.n, self.mfu, self.peak = n_params, n_tokens, n_gpus, mfu, peak_flops
        self.price, self.d, self.L = price_per_gpu_hour, spot_discount, lost_hours_per_preemption

    def hours(self):
        return 6 * self.N * self.D / (self.n * self.peak * self.mfu) / 3600

    def on_demand_cost(self):
        return self.n * self.hours() * self.price

    def spot_cost(self, preemptions=0):
        return self.n * (self.hours() + preemptions * self.L) * self.price * (1 - self.d)

    def break_even_preemptions(self):
        if self.L == 0:
            raise ValueError("no lost work: spot never costs more")
        k = math.floor(self.hours() * self.d / ((1 - self.d) * self.L)) + 1
        while k > 0 and self.spot_cost(k - 1) > self.on_demand_cost():
            k -= 1
        while self.spot_cost(k) <= self.on_demand_cost():
            k += 1
        return k


MODELS_26_20 = {"BERT-base": (110e6, 3.3e9, 8, 0.45), "GPT-2 medium": (345e6, 40e9, 16, 0.42),
                "3B vision": (3e9, 500e9, 64, 0.38)}
ch26_20 = {}
for name, args in MODELS_26_20.items():
    e = CostEstimator(*args)
    ch26_20[name] = {"on_demand": e.on_demand_cost(), "spot": e.spot_cost(0), "break_even": e.break_even_preemptions()}
for name, r in ch26_20.items():
    print(f"{name:<13} on-demand ${r['on_demand']:>10,.2f}   spot ${r['spot']:>10,.2f}   break-even {r['break_even']} preemptions")
