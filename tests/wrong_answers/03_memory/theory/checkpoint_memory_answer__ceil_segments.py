# loses: checkpoint_memory_tests
# why: ceil(L/k) checkpoints where the text counts L // k
def checkpoint_memory(layers, k, layer_bytes):
    """Peak activation bytes with a checkpoint every k layers: (layers // k + k - 1) * layer_bytes."""
    if not (isinstance(k, int) and isinstance(layers, int)) or not 1 <= k <= layers:
        raise ValueError(f"the interval k must be a whole number in 1..layers={layers}, got {k!r}")
    return (-(-layers // k) + k - 1) * layer_bytes


def best_interval(layers):
    """The interval k in 1..layers with the smallest checkpoint_memory (smallest k on ties)."""
    return min(range(1, layers + 1), key=lambda k: (checkpoint_memory(layers, k, 1.0), k))


sqrt_rule_48 = checkpoint_memory(48, best_interval(48), 1.0) / checkpoint_memory(48, 1, 1.0)
print(f"L = 48: best k = {best_interval(48)}, memory ratio {sqrt_rule_48:.3f}")
