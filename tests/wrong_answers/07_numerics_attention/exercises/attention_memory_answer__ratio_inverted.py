# loses: attention_memory_tests
# why: savings_ratio divides flash by standard
@dataclass
class AttentionBenchmark:
    batch: int
    seq_len: int
    d_model: int
    heads: int
    bytes_per_element: float = 2

    def _sizes(self):
        B, s, d, h = self.batch, self.seq_len, self.d_model, self.heads
        return B * s * d, B * h * s * s, B * h * s          # io, att, row

    def forward_bytes(self, method):
        io, att, row = self._sizes()
        if method == "standard":
            return (4 * io + 2 * att) * self.bytes_per_element
        if method == "flash":
            return (4 * io + row) * self.bytes_per_element
        raise ValueError(f"method must be 'standard' or 'flash', got {method!r}")

    def saved_bytes(self, method):
        io, att, row = self._sizes()
        if method == "standard":
            return (3 * io + att) * self.bytes_per_element
        if method == "flash":
            return (4 * io + row) * self.bytes_per_element
        raise ValueError(f"method must be 'standard' or 'flash', got {method!r}")

    def backward_bytes(self, method):
        io, att, row = self._sizes()
        if method == "standard":
            return (7 * io + 3 * att) * self.bytes_per_element
        if method == "flash":
            return (8 * io + 2 * row) * self.bytes_per_element
        raise ValueError(f"method must be 'standard' or 'flash', got {method!r}")

    def savings_ratio(self, phase="backward"):
        fn = {"forward": self.forward_bytes, "saved": self.saved_bytes, "backward": self.backward_bytes}.get(phase)
        if fn is None:
            raise ValueError(f"phase must be 'forward', 'saved' or 'backward', got {phase!r}")
        return fn("flash") / fn("standard")


climate = AttentionBenchmark(batch=8, seq_len=2048, d_model=1536, heads=24)
for phase in ("forward", "saved", "backward"):
    print(f"{phase:>8}: savings {climate.savings_ratio(phase):.2f}x")
