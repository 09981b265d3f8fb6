# loses: all_to_all_tests
# why: the TP ring sends (t-1)/t of the activation, not 2(t-1)/t
def all_to_all_time(n, nbytes, alpha, bandwidth):
    """(n-1) alpha + (n-1)/n * nbytes / bandwidth seconds (pairwise exchange)."""
    if n < 1 or int(n) != n:
        raise ValueError(f"n must be a whole number of ranks >= 1, got {n}")
    if nbytes < 0 or alpha < 0:
        raise ValueError(f"nbytes and alpha must be >= 0, got {nbytes} and {alpha}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")
    return (n - 1) * alpha + (n - 1) / n * nbytes / bandwidth


def moe_alltoall_bytes(tokens, top_k, hidden, bytes_per_element=2, backward=True):
    """4 * tokens * top_k * hidden * bytes (2 * ... without the backward): all-to-all buffer bytes per layer and step."""
    _check_counts(tokens=tokens, top_k=top_k, hidden=hidden)
    if not bytes_per_element > 0:
        raise ValueError(f"bytes_per_element must be > 0, got {bytes_per_element}")
    return (4 if backward else 2) * tokens * top_k * hidden * bytes_per_element


def tp_allreduce_bytes_per_layer(tokens, hidden, tp, bytes_per_element=2, blocks=1, backward=True):
    """(2 if backward else 1) * blocks * 2 (tp-1)/tp * tokens * hidden * bytes: sent per rank."""
    _check_counts(tokens=tokens, hidden=hidden, tp=tp, blocks=blocks)
    if not bytes_per_element > 0:
        raise ValueError(f"bytes_per_element must be > 0, got {bytes_per_element}")
    return (2 if backward else 1) * blocks * (tp - 1) / tp * tokens * hidden * bytes_per_element


def _check_counts(**counts):
    for name, v in counts.items():
        if v < 1 or int(v) != v:
            raise ValueError(f"{name} must be a whole number >= 1, got {v}")


moe_buffer_bytes = moe_alltoall_bytes(4096, 2, 4096, 2)
ep_sent_per_rank = 7 / 8 * moe_buffer_bytes
tp_sent_per_rank = tp_allreduce_bytes_per_layer(4096, 4096, 8, 2)
ep_time_per_layer = 4 * all_to_all_time(8, 4096 * 2 * 4096 * 2, 10e-6, 50e9)
print(f"MoE layer: {moe_buffer_bytes / 2**20:.0f} MiB of all-to-all buffers per step, "
      f"{ep_sent_per_rank / 2**20:.0f} MiB leave each rank (EP = 8)")
print(f"dense MLP with TP = 8: {tp_sent_per_rank / 2**20:.0f} MiB sent per rank; ratio {ep_sent_per_rank / tp_sent_per_rank:.2f}")
print(f"the 4 all-to-alls across nodes: {ep_time_per_layer * 1e3:.2f} ms per layer and step")
print(f"per token processed: EP {8 * ep_sent_per_rank / (8 * 4096) / 1e3:.0f} KB, TP {8 * tp_sent_per_rank / 4096 / 1e3:.0f} KB "
      f"(ratio top_k / t = {(8 * ep_sent_per_rank / (8 * 4096)) / (8 * tp_sent_per_rank / 4096):.2f})")
