# loses: tp_dp_bytes_tests
# why: DP counts 12 d^2 gradient elements, not bytes (bytes_per_element ignored)
def tp_bytes_per_layer(batch, seq_len, hidden, tp, bytes_per_element=2):
    """Payload bytes of one layer's TP all-reduces per step (2 forward + 2 backward)."""
    if min(batch, seq_len, hidden, tp) < 1:
        raise ValueError("batch, seq_len, hidden and tp must be >= 1")
    return 0 if tp == 1 else 4 * batch * seq_len * hidden * bytes_per_element


def dp_bytes_per_layer(hidden, world_size, bytes_per_element=2):
    """Payload bytes of one layer's gradient all-reduce per step (12 hidden^2 parameters)."""
    if hidden < 1 or world_size < 1:
        raise ValueError("hidden and world_size must be >= 1")
    return 0 if world_size == 1 else 12 * hidden**2


d, B, s, n = 4096, 32, 1024, 4
tp_bytes = tp_bytes_per_layer(B, s, d, n)
dp_bytes = dp_bytes_per_layer(d, n)
tp_wire_per_rank = 2 * (n - 1) / n * tp_bytes
dp_wire_per_rank = 2 * (n - 1) / n * dp_bytes
cheaper = "tp" if tp_bytes < dp_bytes else "dp"
breakeven_tokens = 12 * d**2 / (4 * d)        # 4 B s d = 12 d^2  =>  B s = 3 d
print(f"TP {tp_bytes / 1e9:.3f} GB, DP {dp_bytes / 1e9:.3f} GB payload per layer and step; "
      f"per rank on the wire: TP {tp_wire_per_rank / 1e9:.3f} GB, DP {dp_wire_per_rank / 1e9:.3f} GB")
print("cheaper:", cheaper, "| break-even at B*s =", breakeven_tokens)
