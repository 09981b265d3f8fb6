# loses: tp_dropout_validation
# why: an unknown region falls back to the sharded stream instead of raising, and ranks are not checked
import contextlib


class TPDropoutRNG:
    def __init__(self, base_seed, dp_rank, tp_rank):
        seeds = {"replicated": (base_seed * 1_000_003 + 2 * dp_rank) * 1_000_003,
                 "sharded": (base_seed * 1_000_003 + 2 * dp_rank + 1) * 1_000_003 + tp_rank}
        self.states = {r: torch.Generator().manual_seed(s % 2 ** 63).get_state() for r, s in seeds.items()}

    @contextlib.contextmanager
    def fork(self, region):
        if region not in self.states:
            region = "sharded"
        outside = torch.get_rng_state()
        torch.set_rng_state(self.states[region])
        try:
            yield
        finally:
            self.states[region] = torch.get_rng_state()
            torch.set_rng_state(outside)
