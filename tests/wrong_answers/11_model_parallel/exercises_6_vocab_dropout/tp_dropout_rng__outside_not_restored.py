# loses: tp_dropout_tests
# why: the default generator is left on the region's stream after the block: the code outside the fork draws from it too
import contextlib


class TPDropoutRNG:
    def __init__(self, base_seed, dp_rank, tp_rank):
        for name, v in (("base_seed", base_seed), ("dp_rank", dp_rank), ("tp_rank", tp_rank)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        seeds = {"replicated": (base_seed * 1_000_003 + 2 * dp_rank) * 1_000_003,
                 "sharded": (base_seed * 1_000_003 + 2 * dp_rank + 1) * 1_000_003 + tp_rank}
        self.states = {r: torch.Generator().manual_seed(s % 2 ** 63).get_state() for r, s in seeds.items()}

    @contextlib.contextmanager
    def fork(self, region):
        if region not in self.states:
            raise ValueError(f"region must be 'replicated' or 'sharded', got {region!r}")
        torch.set_rng_state(self.states[region])
        try:
            yield
        finally:
            self.states[region] = torch.get_rng_state()
