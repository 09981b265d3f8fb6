"""Training cost: GPU-hours and dollars of a run, on-demand against spot, with preemptions.

Units: FLOPs, FLOP/s per GPU, seconds and hours, dollars per GPU-hour.

The compute time is the textbook's closed form (Chapter 26, exercises 26.20 and 26.21):
C = 6 N D FLOPs (Kaplan et al. 2020) delivered by n_gpus GPUs at a fraction `mfu` of their peak,
T = C / (n_gpus * peak * mfu).

Preemption model (our assumption, stated because the exercises leave it open): the job is
synchronous data parallel, so a preemption stops every GPU and the job restarts from its last
checkpoint; the work since that checkpoint (`lost_hours_per_preemption` of wall-clock) is
recomputed on ALL n_gpus GPUs and is billed at the spot price. Restart and queueing time are
not billed. A preemption rate (per day of wall-clock) applies to the recomputation time too, so
the wall-clock is T / (1 - rate * lost / 24 h).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ._checks import fraction, non_negative, positive

__all__ = ["TrainingCostEstimator", "A100_BF16_PEAK", "HOURS_PER_DAY"]

A100_BF16_PEAK = 312e12  # FLOP/s, dense bf16 tensor cores, A100 40GB and 80GB alike
HOURS_PER_DAY = 24.0


@dataclass(frozen=True)
class TrainingCostEstimator:
    """Cost of training `n_params` parameters on `n_tokens` tokens on `n_gpus` GPUs.

    price_per_gpu_hour: on-demand dollars per GPU-hour. spot_discount: the spot price is
    price * (1 - spot_discount); when a spot price is quoted directly, pass it as the price
    with spot_discount=0. preemptions: a fixed number of spot preemptions in the run, or
    preemptions_per_day: a rate per day of wall-clock (not both). lost_hours_per_preemption:
    wall-clock of work recomputed after each preemption, on all GPUs (see the module docstring).
    total_flops: give the compute target directly instead of 6 N D (then n_tokens is ignored).
    """

    n_params: float
    n_tokens: float
    n_gpus: int
    mfu: float
    peak_flops: float = A100_BF16_PEAK
    price_per_gpu_hour: float = 3.50
    spot_discount: float = 0.65
    preemptions: float = 0.0
    preemptions_per_day: float = 0.0
    lost_hours_per_preemption: float = 0.5
    total_flops_target: float | None = None

    def __post_init__(self):
        positive("n_params", self.n_params)
        non_negative("n_tokens", self.n_tokens)
        positive("n_gpus", self.n_gpus, integer=True)
        fraction("mfu", self.mfu, open_low=True)
        positive("peak_flops", self.peak_flops)
        positive("price_per_gpu_hour", self.price_per_gpu_hour)
        fraction("spot_discount", self.spot_discount)
        if self.spot_discount >= 1:
            raise ValueError("spot_discount must be < 1 (a free GPU has no break-even)")
        non_negative("preemptions", self.preemptions)
        non_negative("preemptions_per_day", self.preemptions_per_day)
        non_negative("lost_hours_per_preemption", self.lost_hours_per_preemption)
        if self.preemptions and self.preemptions_per_day:
            raise ValueError("give either a fixed number of preemptions or a rate per day, not both")
        if self.preemptions_per_day * self.lost_hours_per_preemption >= HOURS_PER_DAY:
            raise ValueError("preemptions_per_day * lost_hours_per_preemption >= 24 h: the run never finishes")
        if self.total_flops_target is not None:
            positive("total_flops_target", self.total_flops_target)

    # ------------------------------------------------------------ compute
    @property
    def total_flops(self) -> float:
        """C = 6 N D FLOPs, or the explicit target."""
        if self.total_flops_target is not None:
            return float(self.total_flops_target)
        return 6.0 * self.n_params * self.n_tokens

    @property
    def cluster_flops_per_second(self) -> float:
        """Useful FLOP/s of the whole job: n_gpus * peak * mfu."""
        return self.n_gpus * self.peak_flops * self.mfu

    @property
    def compute_seconds(self) -> float:
        """T = C / (n_gpus * peak * mfu), seconds, without preemptions."""
        return self.total_flops / self.cluster_flops_per_second

    @property
    def compute_hours(self) -> float:
        return self.compute_seconds / 3600.0

    @property
    def gpu_hours(self) -> float:
        """n_gpus * T in GPU-hours (no recomputation)."""
        return self.n_gpus * self.compute_hours

    @property
    def on_demand_cost(self) -> float:
        """Dollars at the on-demand price, no preemptions: gpu_hours * price."""
        return self.gpu_hours * self.price_per_gpu_hour

    # ------------------------------------------------------------ spot
    @property
    def spot_price(self) -> float:
        return self.price_per_gpu_hour * (1.0 - self.spot_discount)

    @property
    def n_preemptions(self) -> float:
        """Preemptions in the run: the fixed count, or rate * wall-clock days (self-consistent)."""
        if self.preemptions_per_day:
            return self.preemptions_per_day * self.spot_wall_hours / HOURS_PER_DAY
        return float(self.preemptions)

    @property
    def spot_wall_hours(self) -> float:
        """Wall-clock hours on spot: T + preemptions * lost (rate form: T / (1 - rate*lost/24))."""
        if self.preemptions_per_day:
            return self.compute_hours / (1.0 - self.preemptions_per_day * self.lost_hours_per_preemption / HOURS_PER_DAY)
        return self.compute_hours + self.preemptions * self.lost_hours_per_preemption

    @property
    def spot_gpu_hours(self) -> float:
        """GPU-hours billed on spot, recomputation included: n_gpus * spot_wall_hours."""
        return self.n_gpus * self.spot_wall_hours

    @property
    def spot_cost(self) -> float:
        """Dollars on spot: n_gpus * (T + k * lost) * price * (1 - discount)."""
        return self.spot_gpu_hours * self.spot_price

    def spot_cost_with(self, preemptions: float) -> float:
        """Spot cost for a given fixed number of preemptions (the rest unchanged)."""
        non_negative("preemptions", preemptions)
        return self.n_gpus * (self.compute_hours + preemptions * self.lost_hours_per_preemption) * self.spot_price

    @property
    def break_even_preemptions(self) -> int:
        """Smallest whole number k of preemptions at which spot costs MORE than on-demand.

        spot(k) > on-demand  <=>  (T + k L)(1 - d) > T  <=>  k > T d / ((1 - d) L).
        With no lost work (L = 0) spot never costs more: raises ValueError.
        """
        if self.lost_hours_per_preemption == 0:
            raise ValueError("with no lost work per preemption, spot never becomes more expensive")
        x = self.compute_hours * self.spot_discount / ((1.0 - self.spot_discount) * self.lost_hours_per_preemption)
        k = math.floor(x) + 1
        # guard the floor against rounding at an exact integer
        while k > 0 and self.spot_cost_with(k - 1) > self.on_demand_cost:
            k -= 1
        while self.spot_cost_with(k) <= self.on_demand_cost:
            k += 1
        return k

    # ------------------------------------------------------------ budget
    def useful_fraction(self, spot: bool) -> float:
        """Share of billed GPU-hours that is useful (not recomputed) work."""
        if not spot:
            return 1.0
        return self.compute_hours / self.spot_wall_hours if self.spot_wall_hours else 1.0

    def flops_within_budget(self, budget: float, spot: bool = False) -> float:
        """Useful FLOPs a budget buys: budget / price * 3600 * peak * mfu * useful_fraction."""
        positive("budget", budget)
        price = self.spot_price if spot else self.price_per_gpu_hour
        gpu_seconds = budget / price * 3600.0
        return gpu_seconds * self.peak_flops * self.mfu * self.useful_fraction(spot)

    def summary(self) -> dict:
        return {"flops": self.total_flops, "hours": self.compute_hours, "gpu_hours": self.gpu_hours,
                "on_demand_cost": self.on_demand_cost, "spot_cost": self.spot_cost,
                "spot_wall_hours": self.spot_wall_hours}
