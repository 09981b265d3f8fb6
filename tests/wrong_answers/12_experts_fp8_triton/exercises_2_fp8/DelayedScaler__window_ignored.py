# loses: delayed_scaler_tests
# why: keeps every amax: a spike is never forgotten
class DelayedScaler:
    """Delayed scaling: the scale of each call comes from the amaxes of the previous history_len calls."""

    def __init__(self, dtype=torch.float8_e4m3fn, history_len=16):
        self.dtype, self.history_len = dtype, history_len
        self.history = []

    def quantize(self, x):
        past = max(self.history, default=0.0)
        scale = torch.tensor(past / torch.finfo(self.dtype).max if past > 0 else 1.0)
        q = fp8_cast(x.float() / scale, self.dtype)
        self.history = (self.history + [float(x.abs().max())])
        return q, scale
