# loses: commbound_tests
# why: compute counts the forward only (24 h^2 per token) instead of forward and backward (72 h^2)
def dp_times(T, h, n, alpha, B, F, e=2):
    """(comm, compute) seconds of one layer and one optimizer step of data parallelism."""
    S = 12 * h * h * e
    comm = 2 * (n - 1) * alpha + 2 * (n - 1) / n * S / B
    return comm, 24 * h * h * T / F


def tp_times(T, h, t, alpha, B, F, e=2):
    """(comm, compute) seconds of one layer of Megatron TP over t ranks, forward + backward."""
    comm = 0.0 if t == 1 else 4 * (2 * (t - 1) * alpha + 2 * (t - 1) / t * T * h * e / B)
    return comm, 72 * h * h * T / (t * F)


def pp_times(T, h, l, alpha, B, F, e=2):
    """(comm, compute) seconds of one micro-batch of T tokens on a stage of l layers."""
    return 2 * (alpha + T * h * e / B), 72 * h * h * l * T / F


PEAK = 312e12
dp_T_star = dp_times(1, 4096, 64, 5e-6, 25e9, PEAK)[0] * PEAK / (72 * 4096 ** 2)
_a, _b, _c = 72 * 8192 / (8 * PEAK), 8 * 7 * 8192 * 2 / (8 * 300e9), 8 * 7 * 2e-6
tp_h_star = (_b + math.sqrt(_b ** 2 + 4 * _a * _c)) / (2 * _a)
pp_T_star = 2 * 20e-6 / (72 * 1024 ** 2 / PEAK - 2 * 1024 * 2 / 25e9)
fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
Ts = np.logspace(1, 6, 60)
ax[0].plot(Ts, [dp_times(int(x), 4096, 64, 5e-6, 25e9, PEAK)[0] for x in Ts], label="comm (all-reduce)")
ax[0].plot(Ts, [dp_times(int(x), 4096, 64, 5e-6, 25e9, PEAK)[1] for x in Ts], label="compute")
ax[0].axvline(dp_T_star, color="k", ls=":")
ax[0].set_xlabel("tokens per device T")
ax[0].set_title(f"DP, h = 4096, 64 ranks: T* = {dp_T_star:.0f}")
hs = np.logspace(2, 5, 60)
ax[1].plot(hs, [tp_times(8192, int(x), 8, 2e-6, 300e9, PEAK)[0] for x in hs], label="comm (4 all-reduces)")
ax[1].plot(hs, [tp_times(8192, int(x), 8, 2e-6, 300e9, PEAK)[1] for x in hs], label="compute")
ax[1].axvline(tp_h_star, color="k", ls=":")
ax[1].set_xlabel("width h")
ax[1].set_title(f"TP = 8 on NVLink: h* = {tp_h_star:.0f}")
ax[2].plot(Ts, [pp_times(int(x), 1024, 1, 20e-6, 25e9, PEAK)[0] for x in Ts], label="comm (send/recv)")
ax[2].plot(Ts, [pp_times(int(x), 1024, 1, 20e-6, 25e9, PEAK)[1] for x in Ts], label="compute")
ax[2].axvline(pp_T_star, color="k", ls=":")
ax[2].set_xlabel("micro-batch tokens T")
ax[2].set_title(f"PP, h = 1024, 1 layer/stage: T* = {pp_T_star:.0f}")
for a_ in ax:
    a_.set_xscale("log")
    a_.set_yscale("log")
    a_.set_ylabel("seconds per layer")
    a_.legend(fontsize=8)
fig.tight_layout()
plt.show()
print(f"DP bound below {dp_T_star:.0f} tokens/device; TP=8 bound below h = {tp_h_star:.0f}; PP bound below {pp_T_star:.0f} tokens/micro-batch")
