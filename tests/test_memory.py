"""solutions_lib.memory and solutions_lib.models against independent oracles: the ZeRO paper's
published example, Korthikanti et al.'s itemised per-layer terms, torch's own parameters and
AdamW state, the bytes autograd really saves (saved-tensor hooks), a step-by-step simulation
of checkpointed backward passes, brute-force searches, and the ValueError cases."""
import math

import numpy as np
import pytest
import torch

from solutions_lib import memory as M
from solutions_lib.models import CheckpointedTransformer, TwoTowerModel

torch.set_num_threads(1)


# ---------------------------------------------------------------- model state and ZeRO


def test_zero_paper_figure_1():
    # Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N_d = 64, K = 12 (mixed-precision Adam)
    published_gb = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
    for stage, gb in published_gb.items():
        got = M.zero_bytes_per_rank(7.5e9, 64, stage, 2, 2, 12) / 1e9
        assert got == pytest.approx(gb, abs=0.05), (stage, got)
    # and the paper's closed forms, exactly
    psi, n = 7.5e9, 64
    assert M.zero_bytes_per_rank(psi, n, 1) == 4 * psi + 12 * psi / n
    assert M.zero_bytes_per_rank(psi, n, 2) == 2 * psi + 14 * psi / n
    assert M.zero_bytes_per_rank(psi, n, 3) == 16 * psi / n


def test_model_state_examples():
    assert M.model_state_bytes(1e9, 2, 2, 8) == 12e9            # TSX-05
    assert M.model_state_bytes(7e9, 2, 2, 8) == 84e9            # TH-05: 14 + 14 + 56 GB
    assert M.model_state_bytes(7e9, 2, 2, 12) == 112e9          # + fp32 master weights
    assert M.model_state_bytes(7e9, 4, 4, 8) == 112e9           # pure fp32 Adam
    assert M.model_state_bytes(3) == 48                          # default 16 B/param


@pytest.mark.parametrize("seed", range(5))
def test_zero_stages_against_per_tensor_sharding(seed):
    """Shard each state tensor's elements over the ranks and count what rank r holds."""
    rng = np.random.default_rng(seed)
    P = int(rng.integers(1, 10_000)) * 64
    N = int(rng.choice([1, 2, 4, 8, 16, 64]))
    w, g, o = (float(x) for x in rng.choice([0, 2, 4, 8, 12], size=3))
    owned = P / N
    expected = {0: P * (w + g + o), 1: P * (w + g) + owned * o, 2: P * w + owned * (g + o), 3: owned * (w + g + o)}
    table = M.zero_table(P, N, w, g, o)
    for s in range(4):
        assert M.zero_bytes_per_rank(P, N, s, w, g, o) == pytest.approx(expected[s], rel=1e-12)
        assert table[s] == pytest.approx(expected[s], rel=1e-12)
    assert M.zero_bytes_per_rank(P, N, 3, w, g, o) * N == pytest.approx(M.model_state_bytes(P, w, g, o), rel=1e-12)


def test_ch26_18_table_and_stage():
    gb = {s: b / 1e9 for s, b in M.zero_table(7e9, 8, 4, 4, 8).items()}
    assert gb == pytest.approx({0: 112.0, 1: 63.0, 2: 38.5, 3: 14.0})
    assert M.min_zero_stage(7e9, 8, 40e9, 15e9, 4, 4, 8) == 3
    assert M.min_zero_stage(7e9, 8, 80e9, 15e9, 4, 4, 8) == 1
    assert M.min_zero_stage(7e9, 8, 20e9, 15e9, 4, 4, 8) is None


@pytest.mark.parametrize("call", [
    lambda: M.zero_bytes_per_rank(1e9, 8, 4),
    lambda: M.zero_bytes_per_rank(1e9, 8, -1),
    lambda: M.zero_bytes_per_rank(1e9, 8, 1.5),
    lambda: M.zero_bytes_per_rank(1e9, 8, True),
    lambda: M.zero_bytes_per_rank(1e9, 0, 1),
    lambda: M.zero_bytes_per_rank(-1, 8, 1),
    lambda: M.zero_bytes_per_rank(1e9, 8, 1, weight_bytes=-2),
    lambda: M.model_state_bytes(0),
    lambda: M.model_state_bytes(1e9, optimizer_bytes=-4),
    lambda: M.model_state_bytes(float("nan")),
    lambda: M.min_zero_stage(1e9, 8, 0),
])
def test_state_value_errors(call):
    with pytest.raises(ValueError):
        call()


def test_value_error_messages_say_why():
    with pytest.raises(ValueError, match="stage"):
        M.zero_bytes_per_rank(1e9, 8, 5)
    with pytest.raises(ValueError, match="world_size"):
        M.zero_bytes_per_rank(1e9, 0, 1)
    with pytest.raises(ValueError, match="tp=3"):
        M.activation_bytes_per_layer(128, 2, 512, 8, tp=3)
    with pytest.raises(ValueError, match="recompute"):
        M.activation_bytes_per_layer(128, 2, 512, 8, recompute="some")


# ---------------------------------------------------------------- Korthikanti et al. 2022


def itemised_layer_bytes(s, b, h, a, t=1, sp=False, recompute="none"):
    """The paper's section 4 inventory, term by term (16-bit values, 1-byte masks), with the
    tensors each kind of parallelism shards; independent of the library's grouping."""
    sbh, as2b = s * b * h, a * s * s * b
    # (bytes, sharded by TP, an attention-core term dropped by selective recompute)
    terms = [
        (2 * sbh, False, False),   # QKV input
        (4 * sbh, True, False),    # Q and K for QK^T
        (2 * as2b, True, True),    # softmax output
        (1 * as2b, True, True),    # attention dropout mask
        (2 * as2b, True, True),    # attention dropout output (input of att @ V)
        (2 * sbh, True, False),    # V
        (2 * sbh, True, False),    # output projection input
        (1 * sbh, False, False),   # attention dropout mask after the projection
        (2 * sbh, False, False),   # fc1 input
        (8 * sbh, True, False),    # GELU input
        (8 * sbh, True, False),    # GELU output = fc2 input
        (1 * sbh, False, False),   # MLP dropout mask
        (2 * sbh, False, False),   # LayerNorm 1 input
        (2 * sbh, False, False),   # LayerNorm 2 input
    ]
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)
    total = 0.0
    for nbytes, sharded, core in terms:
        if core and recompute == "selective":
            continue
        total += nbytes / t if (sharded or sp) else nbytes
    return total


def test_itemised_inventory_is_the_papers_34_and_5():
    s, b, h, a = 7, 3, 40, 5
    assert itemised_layer_bytes(s, b, h, a) == s * b * h * 34 + 5 * a * s * s * b


@pytest.mark.parametrize("seed", range(8))
def test_activation_bytes_against_itemised_terms(seed):
    rng = np.random.default_rng(100 + seed)
    t = int(rng.choice([1, 2, 4, 8]))
    a = t * int(rng.integers(1, 8))
    h = a * int(rng.integers(8, 128))
    s, b = int(rng.integers(1, 4096)), int(rng.integers(1, 64))
    for sp in (False, True):
        for rc in ("none", "selective", "full"):
            ours = M.activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=sp, recompute=rc)
            assert ours == pytest.approx(itemised_layer_bytes(s, b, h, a, t, sp, rc), rel=1e-12), (sp, rc)


def test_table_2_closed_forms():
    s, b, h, a, t = 2048, 4, 12288, 96, 8
    sbh = s * b * h
    f = M.activation_bytes_per_layer
    assert f(s, b, h, a) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert f(s, b, h, a, tp=t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert f(s, b, h, a, tp=t, sequence_parallel=True) == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    assert f(s, b, h, a, tp=t, recompute="selective") == pytest.approx(sbh * (10 + 24 / t))
    assert f(s, b, h, a, tp=t, sequence_parallel=True, recompute="selective") == pytest.approx(34 * sbh / t)
    assert f(s, b, h, a, recompute="full") == pytest.approx(2 * sbh)
    assert f(s, b, h, a, tp=t, sequence_parallel=True, recompute="full") == pytest.approx(2 * sbh / t)


@pytest.mark.parametrize("kwargs", [
    dict(tp=3), dict(recompute="partial"), dict(tp=0), dict(sequence_parallel="yes"), dict(bytes_per_value=0),
])
def test_activation_value_errors(kwargs):
    with pytest.raises(ValueError):
        M.activation_bytes_per_layer(128, 2, 512, 8, **kwargs)


@pytest.mark.parametrize("args", [(0, 2, 512, 8), (128, -1, 512, 8), (128, 2, 512, 0), (128, 2, 500, 8), (12.5, 2, 512, 8)])
def test_activation_size_errors(args):
    with pytest.raises(ValueError):
        M.activation_bytes_per_layer(*args)


# ---------------------------------------------------------------- measured with torch


def hook_count(model, inputs):
    """Our own count of saved storages (independent of the library's helper)."""
    skip = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers(), *inputs]}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in skip:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(*inputs)
    return sum(seen.values())


CONFIGS = [dict(hidden=32, heads=4, layers=4), dict(hidden=48, heads=6, layers=3, mlp_ratio=2, checkpoint_every=2),
           dict(hidden=16, heads=1, layers=5, checkpoint_every=3), dict(hidden=64, heads=8, layers=2, mlp_ratio=3)]


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("ckpt", [False, True])
def test_transformer_saved_bytes_formula_is_exact(cfg, ckpt):
    model = CheckpointedTransformer(max_seq=24, **cfg)
    model.checkpointing = ckpt
    for B, S in [(1, 24), (3, 10)]:
        idx = model.example_batch(B, S)
        assert hook_count(model, [idx]) == model.saved_bytes(B, S)
        assert M.saved_activation_bytes(model, idx) == model.saved_bytes(B, S)


def test_korthikanti_fp32_no_dropout_matches_measured_blocks():
    """The paper's inventory in fp32 without dropout is our block minus the LayerNorm stats."""
    B, S, H, a, L = 2, 20, 64, 4, 3
    model = CheckpointedTransformer(hidden=H, heads=a, layers=L, max_seq=S)
    measured = hook_count(model, [model.example_batch(B, S)])
    per_layer = M.activation_bytes_per_layer(S, B, H, a, bytes_per_value=4, dropout=False)
    ln_stats = 2 * 8 * B * S
    assert measured == L * (per_layer + ln_stats) + 8 * B * S * H + 8 * B * S


def test_two_tower_saved_bytes():
    model = TwoTowerModel(hidden=40, embed_dim=12)
    batch = model.example_batch(6)
    assert hook_count(model, list(batch)) == 8 * 6 * (40 + 12)


@pytest.mark.parametrize("make", [lambda: CheckpointedTransformer(hidden=32, heads=2, layers=3, max_seq=16),
                                  lambda: TwoTowerModel()])
def test_estimate_memory_consumption_against_torch(make):
    model = make()
    batch = model.example_batch(3)
    est = M.estimate_memory_consumption(model, batch)
    params = list(model.parameters())
    pbytes = sum(p.numel() * p.element_size() for p in params)
    assert est.parameter_bytes == pbytes
    assert est.gradient_bytes == pbytes                       # one fp32 .grad per parameter
    assert est.optimizer_bytes == 2 * pbytes + 4 * len(params)  # exp_avg, exp_avg_sq + fp32 step
    inputs = list(batch) if isinstance(batch, tuple) else [batch]
    assert est.activation_bytes == hook_count(model, inputs)
    assert est.total == pbytes * 4 + 4 * len(params) + est.activation_bytes
    assert est.peak_bytes is None  # CPU
    assert est.as_dict()["total_bytes"] == est.total
    # the caller's model is left alone
    assert all(p.grad is None for p in params)


def test_checkpointing_reduces_activations_by_the_predicted_amount():
    B, S = 2, 16
    model = CheckpointedTransformer(hidden=32, heads=4, layers=6, max_seq=S, checkpoint_every=2)
    batch = model.example_batch(B, S)
    off = M.estimate_memory_consumption(model, batch, checkpointing=False)
    on = M.estimate_memory_consumption(model, batch, checkpointing=True)
    assert model.checkpointing is False
    block = (32 + 8 * 4) * B * S * 32 + 16 * B * S + 4 * 4 * B * S * S
    saved = 6 * block - 3 * 4 * B * S * 32  # six blocks replaced by three segment inputs
    assert off.activation_bytes - on.activation_bytes == saved
    assert on.parameter_bytes == off.parameter_bytes and on.optimizer_bytes == off.optimizer_bytes


def test_checkpointed_gradients_equal_plain_ones():
    model = CheckpointedTransformer(hidden=32, heads=4, layers=3, max_seq=12)
    idx = model.example_batch(2, 12)
    grads = []
    for ck in (False, True):
        model.zero_grad(set_to_none=True)
        model.checkpointing = ck
        model(idx).pow(2).mean().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for g0, g1 in zip(*grads):
        torch.testing.assert_close(g0, g1, rtol=1e-5, atol=1e-7)


def test_estimate_value_errors():
    tt = TwoTowerModel()
    with pytest.raises(ValueError, match="checkpointing"):
        M.estimate_memory_consumption(tt, tt.example_batch(), checkpointing=True)
    with pytest.raises(ValueError):
        M.estimate_memory_consumption(tt, tt.example_batch(), checkpointing="yes")
    with pytest.raises(ValueError):
        M.estimate_memory_consumption("not a model", tt.example_batch())
    with pytest.raises(ValueError):
        M.estimate_memory_consumption(tt, [])
    with pytest.raises(ValueError):
        CheckpointedTransformer(hidden=30, heads=4)


def test_activation_benchmark_within_ten_percent():
    rows = M.activation_benchmark(M.DEFAULT_BENCH_CONFIGS, device="cpu")
    assert len(rows) == len(M.DEFAULT_BENCH_CONFIGS)
    for r in rows:
        assert abs(r["rel_error"]) < 0.10, r
        assert r["measured_bytes"] > 0 and r["predicted_bytes"] > 0


# ---------------------------------------------------------------- checkpoint intervals


def simulate(sizes, kept, free_kept_in_backward):
    """Walk forward and backward layer by layer, tracking live activation bytes; return
    (peak bytes, layers recomputed)."""
    L, live, peak, recomputed = len(sizes), {}, 0.0, 0
    for i in range(L):
        live[i] = sizes[i]
        peak = max(peak, sum(live.values()))
        if i not in kept:
            del live[i]
    for i in reversed(range(L)):
        if i not in live:  # rebuild the run of dropped layers that ends at i
            j = i
            while j - 1 >= 0 and (j - 1) not in kept:
                j -= 1
            for r in range(j, i + 1):
                live[r] = sizes[r]
                recomputed += 1
            peak = max(peak, sum(live.values()))
        if free_kept_in_backward or i not in kept:
            del live[i]
    return peak, recomputed


@pytest.mark.parametrize("seed", range(6))
def test_checkpoint_memory_against_simulation(seed):
    rng = np.random.default_rng(200 + seed)
    L = int(rng.integers(1, 40))
    sizes = [float(x) for x in rng.integers(1, 100, size=L)] if seed % 2 else [3.0] * L
    for k in range(1, L + 1):
        kept = set(M.checkpoint_positions(L, k))
        ours = M.checkpointed_activation_bytes(L, k, sizes)
        conservative, recomputed = simulate(sizes, kept, free_kept_in_backward=False)
        realistic, _ = simulate(sizes, kept, free_kept_in_backward=True)
        assert ours == pytest.approx(conservative)
        assert realistic <= ours  # the course's model keeps passed checkpoints: an upper bound
        if seed % 2 == 0 and k > 1 and L % k == 0:
            assert realistic == ours - sizes[0]  # uniform: one checkpoint is freed before the last rebuild
        assert M.recompute_overhead(L, k) == pytest.approx(recomputed / L)


def test_uniform_closed_forms():
    for L in (12, 24, 48, 50):
        for k in range(1, L + 1):
            assert M.checkpointed_activation_bytes(L, k, 2.0) == 2.0 * (L // k + k - 1)
            assert M.recompute_overhead(L, k) == pytest.approx((L - L // k) / L)
    assert M.checkpointed_activation_bytes(48, 1, 1.0) == 48
    assert M.recompute_overhead(48, 1) == 0


@pytest.mark.parametrize("L", [4, 9, 16, 24, 48, 64, 100])
def test_optimal_interval_brute_force_and_sqrt(L):
    best = min(range(1, L + 1), key=lambda k: (L // k + k - 1, k))
    assert M.optimal_interval(L) == best
    # the interval nearest sqrt(L) is optimal or within one layer's activations of it
    near = round(math.sqrt(L))
    assert M.checkpointed_activation_bytes(L, near, 1.0) <= M.checkpointed_activation_bytes(L, best, 1.0) + 1
    assert M.checkpointed_activation_bytes(L, best, 1.0) >= 2 * math.sqrt(L) - 2  # floor(L/k) + k - 1 > 2 sqrt(L) - 2


def test_non_uniform_layers_change_the_optimum():
    # every fourth layer is 10x larger; a uniform interval of 4 keeps exactly the big ones
    sizes = [10.0 if i % 4 == 3 else 1.0 for i in range(48)]
    k = M.optimal_interval(48, sizes)
    assert k == min(range(1, 49), key=lambda j: (M.checkpointed_activation_bytes(48, j, sizes), j))
    assert M.checkpointed_activation_bytes(48, 4, sizes) == 12 * 10 + 3   # keeps all the big layers
    assert M.checkpointed_activation_bytes(48, 5, sizes) == 40             # a neighbour of 4 is 3x better
    # keeping small layers right before each big one beats every uniform interval
    smart = M.checkpoint_layout_bytes(sizes, [i for i in range(48) if i % 8 == 2])
    assert smart < min(M.checkpointed_activation_bytes(48, j, sizes) for j in range(1, 49))


def test_epoch_time_optimum_48_layers():
    times = {k: M.checkpoint_epoch_time(48, k) for k in range(1, 49)}
    assert min(times, key=times.get) == 3
    assert times[1] == 1.0
    assert times[2] == pytest.approx(1 + 0.5 / 3)          # 25 A at 2x batch does not fit in 48 A
    assert times[3] == pytest.approx((1 + (32 / 48) / 3) / 2)


@pytest.mark.parametrize("call", [
    lambda: M.checkpointed_activation_bytes(48, 0, 1.0),
    lambda: M.checkpointed_activation_bytes(48, 49, 1.0),
    lambda: M.checkpointed_activation_bytes(48, 4, [1.0] * 47),
    lambda: M.checkpointed_activation_bytes(48, 4, -1.0),
    lambda: M.recompute_overhead(0, 1),
    lambda: M.checkpoint_layout_bytes([1.0, 2.0], [2]),
    lambda: M.checkpoint_epoch_time(48, 4, forward_fraction=0),
])
def test_checkpoint_value_errors(call):
    with pytest.raises(ValueError):
        call()


# ---------------------------------------------------------------- CH26-08 calculator


def test_ch26_08_by_hand():
    s, b, h, a, L, n = 512, 16, 1024, 16, 24, 350e6
    sbh = s * b * h
    fp32 = M.training_memory(n, b, s, h, L, a, "fp32")
    assert fp32["weights"] + fp32["gradients"] + fp32["optimizer"] == 16 * n
    assert fp32["activations"] == L * sbh * (66 + 9 * a * s / h)
    amp = M.training_memory(n, b, s, h, L, a, "amp")
    assert amp["weights"] + amp["gradients"] + amp["optimizer"] == 16 * n
    assert amp["activations"] == L * sbh * (34 + 5 * a * s / h)
    ck = M.training_memory(n, b, s, h, L, a, "amp", checkpoint_every=4)
    assert ck["activations"] == (24 // 4 + 3) * sbh * (34 + 5 * a * s / h)
    verdicts = [M.fits_on(x["total"]) for x in (fp32, amp, ck)]
    assert verdicts[0] == {"A100 40GB": True, "A100 80GB": True, "V100 32GB": False}
    assert verdicts[1] == verdicts[2] == {"A100 40GB": True, "A100 80GB": True, "V100 32GB": True}
    with pytest.raises(ValueError):
        M.training_memory(n, b, s, h, L, a, "fp8")
    with pytest.raises(ValueError):
        M.fits_on(-1)


# ---------------------------------------------------------------- segment checkpointing (torch's checkpoint)


def _segment_peak_by_simulation(sizes, k, c):
    """Independent oracle: walk the backward pass segment by segment (last first); while segment j
    is rebuilt, the inputs of segments 0..j and segment j's activations are alive."""
    segs = [sizes[i:i + k] for i in range(0, len(sizes), k)]
    return max((j + 1) * c + sum(seg) for j, seg in enumerate(segs))


@pytest.mark.parametrize("L,k", [(24, 4), (48, 6), (12, 1), (12, 12), (30, 5)])
def test_segment_checkpoint_bytes_by_hand(L, k):
    A, c = 74.0, 2.0                       # the CH26-08 layer in units of s b h: A = 74, c = 2
    assert M.segment_checkpoint_bytes(L, k, A, c) == pytest.approx(math.ceil(L / k) * c + k * A)
    assert M.segment_checkpoint_bytes(L, k, A, c) == pytest.approx(_segment_peak_by_simulation([A] * L, k, c))


def test_segment_checkpoint_bytes_uneven_and_non_uniform():
    # 10 layers, segments of 4: 4 + 4 + 2 layers, three inputs
    assert M.segment_checkpoint_bytes(10, 4, 1.0, 0.1) == pytest.approx(3 * 0.1 + 4)
    sizes = [1.0, 5.0, 1.0, 1.0, 2.0]
    assert M.segment_checkpoint_bytes(5, 2, sizes, 0.5) == pytest.approx(3 * 0.5 + 6.0)
    # c = A recovers a sqrt(L) optimum; c << A puts it at one layer
    assert M.optimal_segment_interval(48, 1.0, 1.0) in (6, 7)
    assert M.optimal_segment_interval(24, 74.0, 2.0) == 1


@pytest.mark.parametrize("L,ratio", [(24, 2 / 74), (48, 2 / 34), (96, 0.1), (64, 0.5), (100, 1.0), (30, 4.0)])
def test_optimal_segment_interval_near_sqrt_L_c_over_A(L, ratio):
    A, c = 1.0, ratio
    best = min(range(1, L + 1), key=lambda k: (math.ceil(L / k) * c + k * A, k))
    assert M.optimal_segment_interval(L, A, c) == best
    k_star = math.sqrt(L * c / A)
    # within one layer's worth of the continuous optimum 2 sqrt(L c A) (ceil adds at most c)
    assert M.segment_checkpoint_bytes(L, best, A, c) <= 2 * math.sqrt(L * c * A) + A + c + 1e-12
    assert abs(best - k_star) <= max(1.0, 0.5 * k_star)


def test_ch26_08_with_torch_segments():
    s, b, h, a, L, n = 512, 16, 1024, 16, 24, 350e6
    sbh = s * b * h
    A = sbh * (34 + 5 * a * s / h)
    ck = M.training_memory(n, b, s, h, L, a, "amp", checkpoint_every=4, checkpoint_model="segments")
    assert ck["activations"] == pytest.approx(6 * 2 * sbh + 4 * A)
    assert ck["total"] / 1e9 == pytest.approx(8.183691264)
    none = M.training_memory(n, b, s, h, L, a, "amp", checkpoint_model="segments")
    assert none["activations"] == M.training_memory(n, b, s, h, L, a, "amp")["activations"]
    per_k = {k: M.training_memory(n, b, s, h, L, a, "amp", checkpoint_every=k, checkpoint_model="segments")["activations"]
             for k in range(1, L + 1)}
    assert min(per_k, key=per_k.get) == 1 == M.optimal_segment_interval(L, A, 2 * sbh)
    assert per_k[1] == pytest.approx(24 * 2 * sbh + A)
    with pytest.raises(ValueError):
        M.training_memory(n, b, s, h, L, a, "amp", checkpoint_every=4, checkpoint_model="chen")
    with pytest.raises(ValueError):
        M.training_memory(n, b, s, h, L, a, "amp", checkpoint_every=25, checkpoint_model="segments")


def test_epoch_time_saturated_gpu():
    # a saturated GPU: the doubled batch takes twice as long, so checkpointing only costs
    sat = {k: M.checkpoint_epoch_time(48, k, doubled_step_time=2.0) for k in range(1, 49)}
    assert min(sat, key=sat.get) == 1 and sat[1] == 1.0
    assert sat[3] == pytest.approx(1 + (32 / 48) / 3)
    mid = M.checkpoint_epoch_time(48, 3, doubled_step_time=1.5)
    assert mid == pytest.approx((1 + (32 / 48) / 3) * 0.75)
    assert M.checkpoint_epoch_time(48, 3) == M.checkpoint_epoch_time(48, 3, doubled_step_time=1.0)
    with pytest.raises(ValueError):
        M.checkpoint_epoch_time(48, 3, doubled_step_time=0)
