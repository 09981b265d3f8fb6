"""The training script's 2-D / 3-D layouts (--tp, --pp, --micro-batches; issue 16).

Oracle: the one-process run (world 1, plain DDP path) with the same global batch. Every layout
sees the same samples per step and computes the gradient of the same mean loss, so the loss
curves agree to float32 rounding: TP sums each matmul's reduction in per-rank partial sums that
are then all-reduced, its attention is the explicit softmax (the one-process model uses
scaled_dot_product_attention), DP averages gradients in another order, PP averages micro-batch
losses. Measured max |loss difference| over the 6 steps: <= 5e-7 on these runs; the bound 1e-5
leaves room for other CPUs / BLAS builds. Resume on the same layout is bit-exact (==).
"""
import json

import numpy as np
import pytest
import torch

from solutions_lib.dist.train import TrainConfig, parse_args, train

pytestmark = pytest.mark.xdist_group("dist_train_layouts")

TINY = dict(steps=6, base_batch=8, seq_len=16, layers=2, d_model=16, heads=2, max_chars=3000, warmup=2,
            lr=3e-3, progress=False, threads=1, timeout=120.0)
GLOBAL = 8
STOP = 3
LAYOUTS = [(1, 2, 1, None), (2, 2, 1, None), (1, 1, 2, None), (1, 2, 2, None), (1, 1, 2, 4)]  # dp, tp, pp, M
RESUMED = [(2, 2, 1), (1, 2, 2)]
TOL = 1e-5


def _cfg(tmp, name, dp=1, tp=1, pp=1, m=None, **kw):
    return TrainConfig(world_size=dp * tp * pp, tp=tp, pp=pp, micro_batches=m, local_batch=GLOBAL // dp,
                       out=str(tmp / name), **{**TINY, **kw})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layouts")
    out = {"tmp": tmp, "single": train(_cfg(tmp, "single"))}
    for dp, tp, pp, m in LAYOUTS:
        out[(dp, tp, pp, m)] = train(_cfg(tmp, f"straight_{dp}{tp}{pp}_{m}", dp, tp, pp, m, return_params=True),
                                     all_ranks=True)
    for dp, tp, pp in RESUMED:
        name = f"split_{dp}{tp}{pp}"
        first = train(_cfg(tmp, name, dp, tp, pp, stop_after=STOP))
        second = train(_cfg(tmp, name, dp, tp, pp, resume=True, return_params=True), all_ranks=True)
        out[("split", dp, tp, pp)] = (first, second)
    return out


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda v: "dp{}_tp{}_pp{}_m{}".format(*v))
def test_loss_curve_equals_one_process(runs, layout):
    single = runs["single"]["losses"]
    ranks = runs[layout]
    got = ranks[0]["losses"]
    assert len(got) == len(single) == TINY["steps"]
    diff = max(abs(a - b) for a, b in zip(got, single))
    assert diff <= TOL, f"layout {layout}: max |loss - one-process loss| = {diff:.3g} > {TOL}"
    assert ranks[0]["layout"] == dict(zip(("dp", "tp", "pp"), layout[:3]))
    assert ranks[0]["log_lines"] >= 2 and all(r["log_lines"] == 0 for r in ranks[1:]), "rank 0 alone logs"


def test_tied_embedding_copies_stay_equal(runs):
    """pp > 1: the last stage's output layer is a copy of the token embedding, kept equal."""
    ranks = runs[(1, 2, 2, None)]  # rank = (pp_rank * dp + dp_rank) * tp + tp_rank: last stage, tp 0 = rank 2
    assert "head" in ranks[2]["params"] and "tok.weight" not in ranks[2]["params"]
    for t in (0, 1):
        assert torch.equal(ranks[t]["params"]["tok.weight"], ranks[2 + t]["params"]["head"])


def test_tp_shards_are_halves(runs):
    ranks = runs[(1, 2, 1, None)]
    full = 3 * TINY["d_model"]
    w0, w1 = (r["params"]["blocks.0.attn.qkv.weight"] for r in ranks)
    assert w0.shape == w1.shape == (full // 2, TINY["d_model"]) and not torch.equal(w0, w1)
    assert torch.equal(ranks[0]["params"]["blocks.0.ln1.weight"], ranks[1]["params"]["blocks.0.ln1.weight"])


@pytest.mark.parametrize("layout", RESUMED, ids=lambda v: "dp{}_tp{}_pp{}".format(*v))
def test_resume_same_layout_is_bit_exact(runs, layout):
    straight = runs[layout + (None,)] if layout + (None,) in runs else None
    first, second = runs[("split",) + layout]
    assert second[0]["start_step"] == STOP
    assert straight is not None
    assert straight[0]["losses"] == first["losses"] + second[0]["losses"], "resumed losses differ"
    for r, (a, b) in enumerate(zip(straight, second)):
        for name, p in a["params"].items():
            assert torch.equal(p, b["params"][name]), f"rank {r}: {name} differs after resume"
    metrics = runs["tmp"] / "split_{}{}{}".format(*layout) / "metrics.jsonl"
    assert [json.loads(ln)["step"] for ln in metrics.read_text().splitlines()] == list(range(TINY["steps"]))


def test_resume_with_another_layout_raises(runs):
    out = runs["tmp"]
    with pytest.raises(ValueError, match="layout dp 1 x tp 2 x pp 2"):
        train(_cfg(out, "split_122", 1, 2, 1, resume=True))
    with pytest.raises(ValueError, match="same layout"):
        train(_cfg(out, "split_221", 1, 1, 1, resume=True))  # a DP-only run cannot load TP shards


def test_layout_config_validation():
    ok = TrainConfig(world_size=8, tp=2, pp=2, local_batch=4, layers=2, heads=2).validate()
    assert (ok.dp, ok.n_micro, ok.global_batch, ok.layout_run) == (2, 2, 8, True)
    assert not TrainConfig(world_size=4).layout_run and TrainConfig(world_size=4).global_batch == 32
    bad = [(dict(world_size=3, tp=2), "multiple of tp x pp"), (dict(world_size=2, tp=2, heads=3, d_model=30), "heads"),
           (dict(world_size=2, pp=2, layers=3), "layers"), (dict(world_size=2, pp=2, local_batch=3), "micro_batches"),
           (dict(world_size=2, tp=2, amp="fp16"), "fp16"), (dict(micro_batches=0), "micro_batches"),
           (dict(tp=0), "tp")]
    for kw, msg in bad:
        with pytest.raises(ValueError, match=msg):
            TrainConfig(**kw).validate()
    cfg = parse_args(["--world-size", "8", "--tp", "2", "--pp", "2", "--micro-batches", "4", "--local-batch", "4"])
    assert (cfg.tp, cfg.pp, cfg.micro_batches, cfg.dp, cfg.global_batch) == (2, 2, 4, 2, 8)
    with pytest.raises(SystemExit):
        parse_args(["--world-size", "4", "--tp", "3"])


# ---------------------------------------------------------------- --sp and --virtual-stages
# Same oracle and tolerance: sequence parallelism only moves where each position's activations
# live (the TP blocks' reduce-scatter / all-gather pairs sum the same partial products as the
# all-reduce), the interleaved schedule runs the same micro-batches through the same layers in
# another order. Measured max |loss - one-process loss| over the 6 steps: 4.8e-7 in each of the
# three layouts (one float32 ulp at loss ~4).

LAYERS4 = 4  # pp 2 x 2 virtual stages: 4 chunks of 1 layer
SPV_LAYOUTS = {  # name: (dp, tp, pp, M, sp, virtual stages, layers)
    "tp2_sp": (1, 2, 1, None, True, 1, 2),
    "pp2_v2_m4": (1, 1, 2, 4, False, 2, LAYERS4),
    "tp2_sp_pp2_v2": (1, 2, 2, None, True, 2, LAYERS4),
}
SPV_RESUMED = ("tp2_sp", "pp2_v2_m4")


def _spv_cfg(tmp, name, layout, **kw):
    dp, tp, pp, m, sp, v, layers = layout
    return _cfg(tmp, name, dp, tp, pp, m, sp=sp, virtual_stages=v, layers=layers, **kw)


@pytest.fixture(scope="module")
def spv_runs(runs):
    tmp = runs["tmp"]
    out = {"tmp": tmp, "single2": runs["single"], "single4": train(_cfg(tmp, "single4", layers=LAYERS4))}
    for name, layout in SPV_LAYOUTS.items():
        out[name] = train(_spv_cfg(tmp, f"straight_{name}", layout, return_params=True), all_ranks=True)
    for name in SPV_RESUMED:
        first = train(_spv_cfg(tmp, f"split_{name}", SPV_LAYOUTS[name], stop_after=STOP))
        second = train(_spv_cfg(tmp, f"split_{name}", SPV_LAYOUTS[name], resume=True, return_params=True),
                       all_ranks=True)
        out[("split", name)] = (first, second)
    return out


def test_sp_and_interleaved_config_validation():
    bad = [(dict(world_size=2, pp=2, sp=True), "sp .*needs tp >= 2"),
           (dict(world_size=2, tp=2, sp=True, seq_len=15, max_chars=100), "seq_len=15 must be divisible by tp=2"),
           (dict(world_size=2, tp=2, virtual_stages=2, layers=4), "needs pp >= 2"),
           (dict(world_size=2, pp=2, virtual_stages=2, layers=4, micro_batches=3, local_batch=6),
            "micro_batches=3 must be a multiple of pp=2"),
           (dict(world_size=2, pp=2, virtual_stages=2, layers=2), "pp x virtual_stages = 2 x 2 must divide layers=2"),
           (dict(world_size=2, tp=2, sp=1), "sp must be True or False"), (dict(virtual_stages=0), "virtual_stages")]
    for kw, msg in bad:
        with pytest.raises(ValueError, match=msg):
            TrainConfig(**kw).validate()
    ok = TrainConfig(world_size=4, tp=2, pp=2, sp=True, virtual_stages=2, layers=4, local_batch=4).validate()
    assert ok.layout == {"dp": 1, "tp": 2, "pp": 2, "sp": True, "virtual_stages": 2}
    cfg = parse_args(["--world-size", "4", "--tp", "2", "--sp", "--pp", "2", "--virtual-stages", "2", "--layers", "4",
                      "--micro-batches", "4", "--local-batch", "4"])
    assert (cfg.sp, cfg.virtual_stages, cfg.n_micro, cfg.dp) == (True, 2, 4, 1)
    assert (parse_args([]).sp, parse_args([]).virtual_stages) == (False, 1)
    for argv in (["--world-size", "2", "--pp", "2", "--sp"], ["--world-size", "2", "--tp", "2", "--virtual-stages", "2"]):
        with pytest.raises(SystemExit):
            parse_args(argv)


@pytest.mark.parametrize("name", list(SPV_LAYOUTS))
def test_sp_and_interleaved_loss_curve_equals_one_process(spv_runs, name):
    dp, tp, pp, m, sp, v, layers = SPV_LAYOUTS[name]
    single = spv_runs[f"single{layers}"]["losses"]
    ranks = spv_runs[name]
    got = ranks[0]["losses"]
    assert len(got) == len(single) == TINY["steps"]
    diff = max(abs(a - b) for a, b in zip(got, single))
    assert diff <= TOL, f"{name}: max |loss - one-process loss| = {diff:.3g} > {TOL}"
    assert (ranks[0]["sp"], ranks[0]["virtual_stages"]) == (sp, v)
    assert len(ranks) == dp * tp * pp
    if v > 1:  # pipeline rank r holds chunks r, r + pp: chunk 0 embeds (rank 0), the last chunk (rank pp-1) has the head
        last = (pp - 1) * dp * tp
        assert {k.split(".")[1] for k in ranks[0]["params"]} == {str(c) for c in range(v)}
        assert "chunks.0.tok.weight" in ranks[0]["params"] and f"chunks.{v - 1}.head" in ranks[last]["params"]
        for t in range(tp):  # the tied copies stay equal
            assert torch.equal(ranks[t]["params"]["chunks.0.tok.weight"], ranks[last + t]["params"][f"chunks.{v - 1}.head"])


@pytest.mark.parametrize("name", SPV_RESUMED)
def test_sp_and_interleaved_resume_is_bit_exact(spv_runs, name):
    straight, (first, second) = spv_runs[name], spv_runs[("split", name)]
    assert second[0]["start_step"] == STOP
    assert straight[0]["losses"] == first["losses"] + second[0]["losses"], f"{name}: resumed losses differ"
    for r, (a, b) in enumerate(zip(straight, second)):
        assert a["params"].keys() == b["params"].keys()
        for key, p in a["params"].items():
            assert torch.equal(p, b["params"][key]), f"{name} rank {r}: {key} differs after resume"


def test_resume_with_another_sp_or_virtual_stages_raises(spv_runs):
    tmp = spv_runs["tmp"]
    with pytest.raises(ValueError, match="sequence parallel; this run is dp 1 x tp 2 x pp 1: .*--sp"):
        train(_cfg(tmp, "split_tp2_sp", 1, 2, 1, resume=True))
    with pytest.raises(ValueError, match="2 virtual stages; this run is dp 1 x tp 1 x pp 2: .*--virtual-stages 2"):
        train(_cfg(tmp, "split_pp2_v2_m4", 1, 1, 2, 4, layers=LAYERS4, resume=True))


def _sp_grads_rank(rank, world):
    """tp 2 + sp on one stage: the loss and the replicated parameters' gradients (after the TP sum)."""
    from solutions_lib.dist.gpt import GPT
    from solutions_lib.dist.train_layout import build_stage, init_layout

    torch.manual_seed(0)
    gpt = GPT(11, 8, layers=1, d_model=8, heads=2)
    stage = build_stage(gpt, init_layout(1, 2, 1), sequence_parallel=True)
    shapes = []
    stage.blocks[0].register_forward_pre_hook(lambda mod, args: shapes.append(tuple(args[0].shape)))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randint(0, 11, (2, 8), generator=g), torch.randint(0, 11, (2, 8), generator=g)
    loss = torch.nn.functional.cross_entropy(stage(x).reshape(-1, 11), y.reshape(-1))
    loss.backward()
    calls = stage.allreduce_replicated_grads()
    rep = {id(p) for p in stage.replicated_parameters()}
    return {"loss": loss.item(), "shapes": shapes, "calls": calls,
            "grads": {n: p.grad.clone() for n, p in stage.named_parameters() if id(p) in rep}}


def test_sp_stage_splits_the_sequence_and_syncs_replicated_grads():
    from solutions_lib.dist.gpt import GPT
    from solutions_lib.dist.launch import launch

    torch.manual_seed(0)
    gpt = GPT(11, 8, layers=1, d_model=8, heads=2)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randint(0, 11, (2, 8), generator=g), torch.randint(0, 11, (2, 8), generator=g)
    loss = torch.nn.functional.cross_entropy(gpt(x).reshape(-1, 11), y.reshape(-1))
    loss.backward()
    oracle = dict(gpt.named_parameters())
    rename = {"attn.proj.bias": "attn.proj.bias", "mlp.fc2.bias": "mlp.2.bias"}
    for r in launch(_sp_grads_rank, 2, timeout=60):
        assert r["shapes"] == [(2, 4, 8)], "the TP block should see its sequence shard (b, s/tp, h)"
        assert r["calls"] == 1
        assert abs(r["loss"] - loss.item()) <= 1e-6
        assert set(r["grads"]) == {"tok.weight", "pos.weight", "ln_f.weight", "ln_f.bias", "blocks.0.ln1.weight",
                                   "blocks.0.ln1.bias", "blocks.0.ln2.weight", "blocks.0.ln2.bias",
                                   "blocks.0.attn.proj.bias", "blocks.0.mlp.fc2.bias"}
        for name, grad in r["grads"].items():
            for a, b in rename.items():
                name = name.replace(a, b)
            torch.testing.assert_close(grad, oracle[name].grad, rtol=1e-5, atol=1e-6, msg=name)


def test_sp_follows_autocast_in_bf16(spv_runs):
    # The sequence-parallel column layer computes its backward in the autocast dtype and returns
    # each gradient in its input's dtype, so --sp runs under --amp bf16 like plain TP does.
    tmp = spv_runs["tmp"]
    sp = train(_spv_cfg(tmp, "bf16_tp2_sp", SPV_LAYOUTS["tp2_sp"], amp="bf16"))
    plain = train(_cfg(tmp, "bf16_tp2", 1, 2, 1, amp="bf16"))
    one = np.asarray(spv_runs["single2"]["losses"])
    a, b = np.asarray(sp["losses"]), np.asarray(plain["losses"])
    assert np.all(np.isfinite(a)) and a.shape == one.shape
    assert np.max(np.abs(a - b)) < 2e-2, (a, b)          # bf16 rounding, summed in another order
    assert np.max(np.abs(a - one)) < 5e-2, (a, one)       # and the fp32 curve
