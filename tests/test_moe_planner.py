"""The planner's expert-parallel axis (issue 29) against the dense planner and closed forms."""
from __future__ import annotations

import math

import pytest

from solutions_lib import moe_planner as mp
from solutions_lib import parallel as dense

H = 1024
DENSE = {"layers": 8, "hidden": H, "heads": 16, "seq_len": 2048, "global_batch": 64, "micro_batch": 1}
NODE = {"n_gpus": 16, "gpus_per_node": 8, "flops": 400e12, "memory": 80e9,
        "intra": (0.0, 450e9), "inter": (0.0, 50e9)}


def test_one_expert_of_width_4h_is_the_dense_layer():
    """E = 1, k = 1, f = 4h, ep = 1, tp = 1, no latency: compute, pipeline and bubble as the dense
    planner's; the gradient all-reduce carries the router's h weights per layer more."""
    model = dict(DENSE, n_experts=1, top_k=1, expert_ffn=4 * H)
    for d, p in ((16, 1), (8, 2), (4, 4)):
        got = mp.moe_layout_step_time(mp.make_moe_layout(d, 1, p, 1), model, NODE)
        want = dense.layout_step_time(dense.make_layout(d, 1, p), DENSE, NODE)
        for key in ("compute", "pp", "bubble"):
            assert got[key] == pytest.approx(want[key], rel=1e-12), key
        assert got["tp"] == got["a2a"] == 0.0
        assert got["dp"] == pytest.approx(want["dp"] * (12 * H * H + H) / (12 * H * H), rel=1e-12)


def test_all_to_all_time_is_four_row_exchanges_per_layer():
    model = dict(DENSE, n_experts=8, top_k=2, expert_ffn=2048)
    lay = mp.make_moe_layout(16, 1, 1, 4)
    alpha, bw = 5e-6, 450e9
    cl = dict(NODE, intra=(alpha, bw))
    got = mp.moe_layout_step_time(lay, model, cl)
    T, l, m, e = 1 * 2048, 8, 64 // 16, 2
    one = 4 * l * (3 / 4 * T * 2 * H * e / bw + 3 * alpha)
    assert got["a2a"] == pytest.approx(m * one, rel=1e-12)
    # the EP group of 4 ranks fits in a node of 8: intra-node; 16 ranks do not: the inter link
    got16 = mp.moe_layout_step_time(mp.make_moe_layout(16, 1, 1, 16), dict(model, n_experts=16), cl)
    assert got16["a2a"] == pytest.approx(m * 4 * l * (15 / 16 * T * 2 * H * e / 50e9), rel=1e-12)


def test_expert_parallelism_shards_the_experts_and_imbalance_slows_them():
    model = dict(DENSE, n_experts=16, top_k=2, expert_ffn=4096)
    mem = {x: mp.moe_layout_memory_per_rank(mp.make_moe_layout(16, 1, 1, x, zero=0), model) for x in (1, 4, 16)}
    assert mem[4]["expert_states"] == pytest.approx(mem[1]["expert_states"] / 4)
    assert mem[16]["expert_states"] == pytest.approx(mem[1]["expert_states"] / 16)
    assert mem[4]["attention_states"] == mem[1]["attention_states"]
    flat = mp.moe_layout_step_time(mp.make_moe_layout(16, 1, 1, 4), model, NODE)
    skew = mp.moe_layout_step_time(mp.make_moe_layout(16, 1, 1, 4), model, NODE, imbalance=2.0)
    T, l, m = 2048, 8, 4
    expert_part = m * l * T * 12.0 * 2 * H * 4096 / 400e12
    assert skew["compute"] - flat["compute"] == pytest.approx(expert_part, rel=1e-12)


def test_the_planner_uses_expert_parallelism_when_the_experts_do_not_fit():
    # 4 layers: pipeline parallelism can split the experts only 4 ways, expert parallelism 16
    model = dict(DENSE, layers=4, n_experts=64, top_k=2, expert_ffn=8192)
    cands = mp.candidate_moe_layouts(model, NODE)
    need = {i: mp.moe_layout_memory_per_rank(lay, model)["total"] for i, lay in enumerate(cands)}
    # a GPU just too small for every layout that keeps all experts on each rank
    small = dict(NODE, memory=0.99 * min(need[i] for i, lay in enumerate(cands) if lay["ep"] == 1))
    assert any(need[i] <= small["memory"] for i, lay in enumerate(cands) if lay["ep"] > 1)
    best = mp.best_moe_layout(model, small)
    assert best is not None and best["ep"] > 1
    assert mp.moe_layout_memory_per_rank(best, model)["total"] <= small["memory"]
    times = [mp.moe_layout_step_time(lay, model, small)["total"] for lay in mp.candidate_moe_layouts(model, small)
             if mp.moe_layout_memory_per_rank(lay, model)["total"] <= small["memory"]]
    assert mp.moe_layout_step_time(best, model, small)["total"] == min(times)
    assert mp.best_moe_layout(model, dict(NODE, memory=1e6)) is None


@pytest.mark.parametrize("layout, model, match", [
    (mp.make_moe_layout(16, 1, 1, 3), dict(DENSE, n_experts=8, top_k=2, expert_ffn=64), "ep=3"),
    (mp.make_moe_layout(8, 1, 1, 16), dict(DENSE, n_experts=16, top_k=2, expert_ffn=64), "ep=16"),
    (mp.make_moe_layout(16, 1, 1, 1), dict(DENSE, n_experts=2, top_k=3, expert_ffn=64), "top_k"),
    (mp.make_moe_layout(16, 1, 1, 1), dict(DENSE), "n_experts"),
    ({"dp": 16, "tp": 1, "pp": 1}, dict(DENSE, n_experts=2, top_k=1, expert_ffn=64), "keys"),
])
def test_bad_layouts_and_models_raise(layout, model, match):
    with pytest.raises(ValueError, match=match):
        mp.moe_layout_step_time(layout, model, NODE)


def test_imbalance_below_one_raises():
    model = dict(DENSE, n_experts=4, top_k=1, expert_ffn=64)
    with pytest.raises(ValueError, match="imbalance"):
        mp.moe_layout_step_time(mp.make_moe_layout(16, 1, 1, 2), model, NODE, imbalance=0.5)
    assert math.isfinite(mp.moe_layout_step_time(mp.make_moe_layout(16, 1, 1, 2), model, NODE)["total"])
