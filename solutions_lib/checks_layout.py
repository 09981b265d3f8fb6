"""Checks of 11 theory parts 1-4 (the layout model: `layer_comm_bytes`, `memory_per_rank`,
`step_time`, `best_layout`), kept here so that each test cell reads as a few lines of intent.

The visible checks compare a student's function with the closed forms of the notebook's text,
computed here from literals (no reference answer). The case generators draw the hidden inputs from
the seed the test cell gives them; the test cell computes the expected values with the reference
(`solutions_lib.parallel`), watches the student's calls (`expect_own`, `no_delegation`: they must
stay in the cell, where a grader-side cell runs them in the kernel) and hands both lists to
`expect_all_close` / `expect_all_equal`. Nothing here knows the answer beyond what the text states.

The models and clusters are the notebook's (its setup cell), as plain data, so a check needs
nothing from the kernel but the function it grades.
"""
from __future__ import annotations

import importlib

import numpy as np

from .checks_planner import layout as make_layout
from .grading import expect_close, expect_equal

MEMORY_KEYS = ["activations", "states", "total"]
TIME_KEYS = ["bubble", "compute", "dp", "pp", "total", "tp"]

MODEL_13B = dict(layers=40, hidden=5120, heads=40, seq_len=2048, global_batch=512, micro_batch=1)
GPT3_175B = dict(layers=96, hidden=12288, heads=96, seq_len=2048, global_batch=1536, micro_batch=1)
NVLINK_IB = dict(n_gpus=32, gpus_per_node=8, flops=400e12, memory=80e9, intra=(5e-6, 450e9), inter=(10e-6, 50e9))
PCIE_ETH = dict(n_gpus=32, gpus_per_node=8, flops=400e12, memory=80e9, intra=(10e-6, 16e9), inter=(30e-6, 12.5e9 / 8))
SELENE = dict(n_gpus=1024, gpus_per_node=8, flops=150e12, memory=80e9, intra=(5e-6, 300e9), inter=(10e-6, 25e9))

BEST_LAYOUT_HINT = (
    "Enumerate t | gpus_per_node and heads, p | layers, d = N/(t p), global_batch % (d b) == 0; keep memory_per_rank"
    "(...)['total'] <= memory; take the smallest step_time(..., reshard_after_forward)['total'] (ties: smaller t, then p); zero = 3 "
    "without resharding: add 2 P_r bytes before comparing with memory; return make_layout(...).")


def forbidden(*modules: str, allowed=()) -> list:
    """What a part's answer may not call: the reference planner (`solutions_lib.parallel`), the
    memory model, the modules `modules` (names under solutions_lib) and the course's copies in
    `upstream` other than the names `allowed`."""
    from . import upstream

    mods = [importlib.import_module(f"solutions_lib.{m}") for m in ("parallel", "memory", *modules)]
    return [*mods, *upstream.forbidden_except(*(getattr(upstream, n) for n in allowed))]


def expect_all_close(got, expected, whats, keys=None, **tol) -> None:
    """One `expect_close` per hidden case, in order: the values (or, with `keys`, the listed
    entries of each returned dict) against the expected ones."""
    for g, e, what in zip(got, expected, whats):
        if keys is not None:
            g, e = [g[k] for k in keys], [e[k] for k in keys]
        expect_close(g, e, what, **tol)


def expect_all_equal(got, expected, whats, hint: str = "") -> None:
    """One `expect_equal` per hidden case, in order."""
    for g, e, what in zip(got, expected, whats):
        expect_equal(g, e, what, hint=hint)


# ---------------------------------------------------------------- part 1: bytes per layer


def check_layer_comm_tp_sp(layer_comm_bytes) -> None:
    """Tensor and sequence parallelism on 13B-sized layers: 8 (t-1)/t and 10 (t-1)/t b s h e."""
    S = 1 * 2048 * 5120 * 2
    print(f"TP, t = 8, one 13B layer (b = 1, s = 2048, h = 5120): {layer_comm_bytes('tp', 1, 2048, 5120, 8) / 1e6:.1f} MB")
    expect_close(layer_comm_bytes("tp", 1, 2048, 5120, 8), 8 * 7 / 8 * S, "layer_comm_bytes('tp', 1, 2048, 5120, 8)",
                 rtol=1e-9, unit="B", hint="4 ring all-reduces of b s h e bytes, each sending 2 (t-1)/t of it.")
    expect_close(layer_comm_bytes("tp", 4, 1024, 4096, 2, bytes_per_element=4), 8 * 1 / 2 * 4 * 1024 * 4096 * 4,
                 "layer_comm_bytes('tp', 4, 1024, 4096, 2, bytes_per_element=4)", rtol=1e-9, unit="B")
    expect_close(layer_comm_bytes("tp", 1, 2048, 5120, 1), 0.0, "layer_comm_bytes('tp', ..., degree=1): nothing to send",
                 atol=1e-9, unit="B")
    expect_close(layer_comm_bytes("sp", 1, 2048, 5120, 8), 10 * 7 / 8 * S, "layer_comm_bytes('sp', 1, 2048, 5120, 8)",
                 rtol=1e-9, unit="B", hint="Memory-optimal SP: 6 all-gathers (2 of them again in the backward) + 4 "
                                           "reduce-scatters of b s h e, each sending (t-1)/t of it: 10 (t-1)/t b s h e.")
    expect_close(layer_comm_bytes("sp", 2, 1024, 4096, 4, bytes_per_element=4), 10 * 3 / 4 * 2 * 1024 * 4096 * 4,
                 "layer_comm_bytes('sp', 2, 1024, 4096, 4, bytes_per_element=4)", rtol=1e-9, unit="B")


def check_layer_comm_pp_cp(layer_comm_bytes) -> None:
    """Pipeline (2 b s h e per interior stage) and context parallelism (the ring of K and V chunks,
    grouped-query attention through kv_hidden)."""
    S = 1 * 2048 * 5120 * 2
    expect_close(layer_comm_bytes("pp", 1, 2048, 5120, 4), 2 * S, "layer_comm_bytes('pp', 1, 2048, 5120, 4)", rtol=1e-9,
                 unit="B", hint="An interior stage sends the activation forward and the gradient backward: 2 b s h e.")
    expect_close(layer_comm_bytes("pp", 1, 2048, 5120, 1), 0.0, "layer_comm_bytes('pp', ..., degree=1)", atol=1e-9, unit="B")
    chunk = 1 * (8192 // 4) * 4096 * 2
    print(f"CP, c = 4, s = 8192, h = 4096: {layer_comm_bytes('cp', 1, 8192, 4096, 4) / 1e6:.1f} MB per rank")
    expect_close(layer_comm_bytes("cp", 1, 8192, 4096, 4), (6 * 3 + 2) * chunk, "layer_comm_bytes('cp', 1, 8192, 4096, 4)",
                 rtol=1e-9, unit="B", hint="chunk = b (s/c) h_kv e; forward 2 (c-1) chunks (K and V), backward 4 (c-1) + 2 "
                                           "(K, V, dK, dV, and dK, dV's last hop home).")
    expect_close(layer_comm_bytes("cp", 2, 4096, 4096, 2, kv_hidden=1024), (6 * 1 + 2) * 2 * 2048 * 1024 * 2,
                 "layer_comm_bytes('cp', 2, 4096, 4096, 2, kv_hidden=1024): grouped-query attention", rtol=1e-9, unit="B",
                 hint="Only K and V travel: use kv_hidden, not hidden, when it is given.")


def layer_comm_cases(seed, axes) -> list[tuple]:
    """24 argument tuples of `layer_comm_bytes` drawn from `seed`: for ("tp", "sp") (axis, b, s,
    h, t, e); for ("pp", "cp") (axis, b, s, h, n, e, kv_hidden or None) with n | s."""
    rng = np.random.default_rng(seed)
    if tuple(axes) == ("tp", "sp"):
        return [(str(rng.choice(["tp", "sp"])), int(rng.integers(1, 9)), int(rng.choice([128, 512, 2048, 8192])),
                 int(rng.choice([256, 1024, 4096, 12288])), int(rng.choice([1, 2, 3, 4, 8, 16])), int(rng.choice([1, 2, 4])))
                for _ in range(24)]
    if tuple(axes) != ("pp", "cp"):
        raise ValueError(f"axes must be ('tp', 'sp') or ('pp', 'cp'), got {axes!r}")
    cases = []
    for _ in range(24):
        n = int(rng.choice([1, 2, 3, 4, 8]))
        h = int(rng.choice([256, 1024, 4096]))
        cases.append((str(rng.choice(["pp", "cp"])), int(rng.integers(1, 9)), n * int(rng.choice([16, 128, 1024])), h,
                      n, int(rng.choice([1, 2, 4])), None if rng.random() < 0.5 else h // int(rng.choice([2, 4, 8]))))
    return cases


# ---------------------------------------------------------------- part 2: memory per rank


def check_memory_per_rank(memory_per_rank) -> None:
    """GPT-3 175B on Megatron's layout (ZeRO-0 and ZeRO-1) and 13B with context parallelism,
    ZeRO-3 and no SP, against the text's closed forms."""
    got = memory_per_rank(make_layout(8, 8, 16, 1, 0, True), GPT3_175B)
    print({k: f"{v / 1e9:.2f} GB" for k, v in got.items()})
    expect_equal([k for k in MEMORY_KEYS if k in got], MEMORY_KEYS, "the keys of memory_per_rank's dict (extra keys are fine)",
                 hint="Return a dict with the keys 'states', 'activations' and 'total'.")
    Pr = 12 * 12288 ** 2 * 96 / 16 / 8
    expect_close(got["states"], 16 * Pr, "states of GPT-3 175B with t = 8, p = 16, d = 8, ZeRO-0", rtol=1e-9, unit="B",
                 hint="P_r = 12 h^2 (L/p) / t parameters at 16 bytes each.")
    expect_close(got["activations"], 6 * 16 * 34 * 2048 * 12288 / 8, "activations of GPT-3 175B with t = 8, p = 16, TP + SP",
                 rtol=1e-9, unit="B", hint="L/p = 6 layers x min(p, m) = 16 micro-batches x 34 s b h / t bytes.")
    expect_close(got["total"], got["states"] + got["activations"], "total = states + activations", rtol=1e-12, unit="B")
    got = memory_per_rank(make_layout(8, 8, 16, 1, 1, True), GPT3_175B)
    expect_close(got["states"], Pr * (4 + 12 / 8), "states with ZeRO-1 over d = 8", rtol=1e-9, unit="B",
                 hint="ZeRO-1 shards the 12 bytes of fp32 optimizer state over the d c ranks holding the same weights.")
    got = memory_per_rank(make_layout(2, 2, 4, 2, 3, False), MODEL_13B)
    expect_close([got["states"], got["activations"]],
                 [16 * 12 * 5120 ** 2 * 10 / 2 / 4, 10 * 4 * 1024 * 1 * 5120 * (10 + 24 / 2)],
                 "13B with d = 2, t = 2, p = 4, c = 2, ZeRO-3, no SP: [states, activations]", rtol=1e-9, unit="B",
                 hint="ZeRO-3 shards all 16 bytes over d c = 4 ranks; each rank holds s/c = 1024 tokens; without SP a layer "
                      "keeps s b h (10 + 24/t); 1F1B holds min(p, m) = 4 micro-batches.")


def memory_cases(seed, n=30) -> list[tuple]:
    """(layout, model) pairs drawn from `seed`: t | heads, p | layers, d b | global batch, cp up
    to 4, every ZeRO stage, SP on or off."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        a = int(rng.choice([8, 16, 32, 40, 96]))
        L = int(rng.choice([12, 24, 32, 40, 96]))
        model = dict(layers=L, hidden=a * int(rng.choice([64, 128])), heads=a, seq_len=int(rng.choice([1024, 2048, 8192])),
                     global_batch=0, micro_batch=int(rng.choice([1, 2, 4])))
        d, c = int(rng.choice([1, 2, 4, 8, 64])), int(rng.choice([1, 2, 4]))
        model["global_batch"] = d * model["micro_batch"] * int(rng.choice([1, 2, 3, 8, 64]))
        t = int(rng.choice([x for x in (1, 2, 4, 8) if a % x == 0]))
        p = int(rng.choice([x for x in (1, 2, 3, 4, 6, 8, 12) if L % x == 0]))
        cases.append((make_layout(d, t, p, c, int(rng.integers(0, 4)), bool(rng.integers(0, 2))), model))
    return cases


def describe_memory(case) -> str:
    """A hidden check's description: the case's inputs only."""
    lay, model = case
    return (f"memory_per_rank({lay}, L={model['layers']}, h={model['hidden']}, s={model['seq_len']}, "
            f"B={model['global_batch']}, b={model['micro_batch']}): [activations, states, total]")


# ---------------------------------------------------------------- part 3: step time


def check_step_time(step_time) -> None:
    """A toy (4 layers, h = 1024, 2 nodes of 4 GPUs, (d, t, p) = (2, 2, 2): l = 2, m = 4,
    T = 2048) against the slot formula of the text, with ZeRO-1, -2 and -3 (with and without
    resharding after the forward)."""
    toy_model = dict(layers=4, hidden=1024, heads=8, seq_len=1024, global_batch=16, micro_batch=2)
    toy_cluster = dict(n_gpus=8, gpus_per_node=4, flops=1e14, memory=80e9, intra=(1e-5, 1e11), inter=(2e-5, 1e10))
    got = step_time(make_layout(2, 2, 2, 1, 1, True), toy_model, toy_cluster)
    print({k: f"{v * 1e3:.3f} ms" for k, v in got.items()})
    expect_equal([k for k in TIME_KEYS if k in got], TIME_KEYS, "the keys of step_time's dict (extra keys are fine)",
                 hint="Return a dict with the keys 'compute', 'tp', 'pp', 'bubble', 'dp' and 'total'.")
    t_c = 72 * 1024 ** 2 * 2 * 2048 / (2 * 1e14)
    t_tp = 4 * 2 * (2 * 1e-5 + 2 * 1 / 2 * 2048 * 1024 * 2 / 1e11)
    t_pp = 2 * (2e-5 + 2048 * 1024 * 2 / 1e10)
    t_dp = 2 * 1e-5 + 2 * 1 / 2 * (12 * 1024 ** 2 * 2 * 2 / 2) / 1e11
    expect_close(got["compute"], 4 * t_c, "toy: compute = m t_c", rtol=1e-9, unit="s",
                 hint="72 h^2 FLOPs per token and layer, l layers, T = b s tokens, split over t ranks: 72 h^2 l T / (t F), m times.")
    expect_close(got["tp"], 4 * t_tp, "toy: tp = m t_tp", rtol=1e-9, unit="s",
                 hint="4 ring all-reduces of T h e bytes per layer on the intra-node link, l layers, m micro-batches.")
    expect_close(got["pp"], 4 * t_pp, "toy: pp = m t_pp (8 GPUs in 2 nodes: the inter-node link)", rtol=1e-9, unit="s",
                 hint="Activation forward + gradient backward, 2 (alpha + T h e / bandwidth), once per micro-batch.")
    expect_close(got["dp"], t_dp, "toy: dp (G = 4 is a multiple of t d = 4: the DP group stays in a node)", rtol=1e-9, unit="s",
                 hint="One ring all-reduce of the rank's 12 h^2 l / t gradients (e = 2 bytes) over d ranks.")
    expect_close(got["bubble"], (2 - 1) * (t_c + t_tp + t_pp), "toy: bubble = (p - 1) slots", rtol=1e-9, unit="s")
    expect_close(got["total"], (4 + 2 - 1) * (t_c + t_tp + t_pp) + t_dp, "toy: total = (m + p - 1) slots + dp", rtol=1e-9, unit="s")
    got = step_time(make_layout(2, 2, 2, 1, 2, True), toy_model, toy_cluster)
    expect_close(got["dp"], (4 + 1) * t_dp / 2, "toy with ZeRO-2: dp = (m + 1) half-rings", rtol=1e-9, unit="s",
                 hint="ZeRO-2: a reduce-scatter of the gradient per micro-batch (m of them) and one all-gather of the "
                      "updated weights; a half-ring is half of the all-reduce time.")
    got = step_time(make_layout(2, 2, 2, 1, 3, True), toy_model, toy_cluster)
    expect_close(got["dp"], 4 * 3 * t_dp / 2, "toy with ZeRO-3: dp = 3 m half-rings", rtol=1e-9, unit="s",
                 hint="ZeRO-3, per micro-batch: all-gather the weights for the forward, again for the backward, "
                      "reduce-scatter the gradient.")
    got = step_time(make_layout(2, 2, 2, 1, 3, True), toy_model, toy_cluster, reshard_after_forward=False)
    expect_close(got["dp"], 4 * 2 * t_dp / 2, "toy with ZeRO-3, reshard_after_forward=False: dp = 2 m half-rings",
                 rtol=1e-9, unit="s", hint="Weights kept from forward to backward: one all-gather and one reduce-scatter "
                                           "per micro-batch.")


def step_time_cases(seed, n=30) -> list[tuple]:
    """(layout, model, cluster, reshard_after_forward) drawn from `seed`: d t p = N, t | G and
    heads, p | layers, cp = 1, every ZeRO stage."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        G = int(rng.choice([4, 8]))
        N = G * int(rng.choice([1, 1, 2, 4, 16]))
        a = int(rng.choice([8, 16, 32, 40]))
        L = int(rng.choice([8, 12, 24, 40]))
        t = int(rng.choice([x for x in (1, 2, 4, 8) if G % x == 0 and a % x == 0]))
        p = int(rng.choice([x for x in range(1, L + 1) if L % x == 0 and (N // t) % x == 0]))
        d = N // (t * p)
        b = int(rng.choice([1, 2, 4]))
        model = dict(layers=L, hidden=a * int(rng.choice([64, 128])), heads=a, seq_len=int(rng.choice([512, 2048, 4096])),
                     global_batch=d * b * int(rng.choice([1, 3, 8, 32])), micro_batch=b)
        cluster = dict(n_gpus=N, gpus_per_node=G, flops=float(rng.choice([1e14, 4e14])), memory=80e9,
                       intra=(float(rng.choice([0.0, 5e-6])), float(rng.choice([1.6e10, 4.5e11]))),
                       inter=(float(rng.choice([1e-5, 3e-5])), float(rng.choice([1.5e9, 5e10]))))
        cases.append((make_layout(d, t, p, 1, int(rng.integers(0, 4)), bool(rng.integers(0, 2))), model, cluster,
                      bool(rng.integers(0, 2))))
    return cases


def describe_step_time(case) -> str:
    """A hidden check's description: the case's inputs only."""
    lay, model, cl, reshard = case
    return (f"step_time(d={lay['dp']}, t={lay['tp']}, p={lay['pp']}, zero={lay['zero']}, reshard={reshard}; L={model['layers']}, "
            f"h={model['hidden']}; N={cl['n_gpus']}, G={cl['gpus_per_node']}): [bubble, compute, dp, pp, total, tp]")


# ---------------------------------------------------------------- part 4: the best layout


def check_best_layout(best_layout) -> None:
    """The layouts the text derives (13B on NVLink/InfiniBand and on PCIe/Ethernet, smaller GPUs,
    every ZeRO stage, GPT-3 on SELENE, a global batch that rules out d = 8, nothing that fits),
    compared as dicts. The course's memory and time models must be bound in the notebook (the
    test cell swaps them in) so a slip in parts 2-3 is not counted here."""
    small = dict(layers=8, hidden=4096, heads=32, seq_len=1024, global_batch=64, micro_batch=1)
    model_24l = dict(layers=24, hidden=2048, heads=32, seq_len=4096, global_batch=256, micro_batch=1)
    for what, args, want in [
        ("best_layout(MODEL_13B, NVLINK_IB)", (MODEL_13B, NVLINK_IB), make_layout(8, 1, 4, 1, 1, True)),
        ("best_layout(MODEL_13B, PCIE_ETH)", (MODEL_13B, PCIE_ETH), make_layout(8, 1, 4, 1, 1, True)),
        ("best_layout(MODEL_13B, NVLINK_IB with 24 GB GPUs)", (MODEL_13B, dict(NVLINK_IB, memory=24e9)),
         make_layout(4, 2, 4, 1, 1, True)),
        ("best_layout(MODEL_13B, NVLINK_IB with 16 GB GPUs, zero=0)", (MODEL_13B, dict(NVLINK_IB, memory=16e9), 0),
         make_layout(1, 4, 8, 1, 0, True)),
        ("best_layout(GPT3_175B, SELENE, zero=0)", (GPT3_175B, SELENE, 0), make_layout(16, 8, 8, 1, 0, True)),
        ("best_layout(GPT3_175B, 32 GPUs of SELENE, zero=0): nothing fits", (GPT3_175B, dict(SELENE, n_gpus=32), 0), None),
        ("best_layout(MODEL_13B with 6 sequences per step, NVLINK_IB): d x micro_batch must divide global_batch",
         (dict(MODEL_13B, global_batch=6), NVLINK_IB), make_layout(1, 8, 4, 1, 1, True)),
        ("best_layout(MODEL_13B, PCIE_ETH, zero=2)", (MODEL_13B, PCIE_ETH, 2), make_layout(4, 1, 8, 1, 2, True)),
        ("best_layout(MODEL_13B, PCIE_ETH, zero=3)", (MODEL_13B, PCIE_ETH, 3), make_layout(1, 4, 8, 1, 3, True)),
        ("best_layout(SMALL, PCIE_ETH with 16 GB GPUs, zero=3)", (small, dict(PCIE_ETH, memory=16e9), 3),
         make_layout(1, 4, 8, 1, 3, True)),
        ("best_layout(SMALL, PCIE_ETH with 16 GB GPUs, zero=3, reshard_after_forward=False): one all-gather fewer per "
         "micro-batch makes DP affordable", (small, dict(PCIE_ETH, memory=16e9), 3, True, False), make_layout(8, 1, 4, 1, 3, True)),
        ("best_layout(MODEL_24L, NVLINK_IB with 8 GB GPUs, zero=3, reshard_after_forward=False): the kept weights (2 P_r) "
         "must fit too", (model_24l, dict(NVLINK_IB, memory=8e9), 3, True, False), make_layout(4, 1, 8, 1, 3, True)),
    ]:
        got = best_layout(*args)
        print(f"{what}: {got}")
        expect_equal(got, want, what, hint=BEST_LAYOUT_HINT)


def best_layout_cases(seed, n=20) -> list[tuple]:
    """(model, cluster, zero, True, reshard_after_forward) drawn from `seed`: 1-16 nodes of 4 or
    8 GPUs, 8-80 GB each, every ZeRO stage."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        G = int(rng.choice([4, 8]))
        a = int(rng.choice([8, 16, 24, 32, 40]))
        model = dict(layers=int(rng.choice([8, 12, 16, 24, 32, 40])), hidden=a * int(rng.choice([64, 128, 256])), heads=a,
                     seq_len=int(rng.choice([1024, 2048, 4096])), global_batch=int(rng.choice([64, 128, 256, 512])),
                     micro_batch=int(rng.choice([1, 2, 4])))
        cluster = dict(n_gpus=G * int(rng.choice([1, 2, 4, 8, 16])), gpus_per_node=G, flops=float(rng.choice([1e14, 3e14])),
                       memory=float(rng.choice([8e9, 16e9, 24e9, 80e9])),
                       intra=(float(rng.choice([2e-6, 1e-5])), float(rng.choice([1.6e10, 3e11]))),
                       inter=(float(rng.choice([1e-5, 3e-5])), float(rng.choice([1.5e9, 2.5e10]))))
        cases.append((model, cluster, int(rng.integers(0, 4)), True, bool(rng.integers(0, 2))))
    return cases


def describe_best_layout(case) -> str:
    """A hidden check's description: the case's inputs only."""
    model, cl, z, _, reshard = case
    return (f"best_layout(L={model['layers']}, h={model['hidden']}, a={model['heads']}, s={model['seq_len']}, "
            f"B={model['global_batch']}, b={model['micro_batch']}; N={cl['n_gpus']}, G={cl['gpus_per_node']}, "
            f"memory={cl['memory']:.0e}; zero={z}, reshard_after_forward={reshard})")
