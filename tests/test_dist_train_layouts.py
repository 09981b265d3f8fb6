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
