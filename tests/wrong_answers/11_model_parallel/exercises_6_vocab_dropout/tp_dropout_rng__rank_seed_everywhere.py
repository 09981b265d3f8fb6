# loses: tp_dropout_tests
# why: the opposite slip: both regions seeded by the global rank, so the replicated activation gets a different mask on each TP rank and the copies drift apart
import contextlib


class TPDropoutRNG:
    def __init__(self, base_seed, dp_rank, tp_rank):
        for name, v in (("base_seed", base_seed), ("dp_rank", dp_rank), ("tp_rank", tp_rank)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        rank = dp_rank * 1000 + tp_rank
        seeds = {"replicated": base_seed + 2 * rank, "sharded": base_seed + 2 * rank + 1}
        self.states = {r: torch.Generator().manual_seed(s % 2 ** 63).get_state() for r, s in seeds.items()}

    @contextlib.contextmanager
    def fork(self, region):
        if region not in self.states:
            raise ValueError(f"region must be 'replicated' or 'sharded', got {region!r}")
        outside = torch.get_rng_state()
        torch.set_rng_state(self.states[region])
        try:
            yield
        finally:
            self.states[region] = torch.get_rng_state()
            torch.set_rng_state(outside)
