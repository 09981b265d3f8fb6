"""solutions_lib.probes_attention: the measurements the 07 attention test cells make (issue 24),
and the bottom-right causal convention of 07 exercises 2 against torch's SDPA (issue 27 item 16)."""
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from solutions_lib.probes_attention import AttentionProbe, OneShotBlocks, causal_visible, tile_bound, visible_tile_macs

NB2 = Path(__file__).resolve().parents[1] / "source" / "07_numerics_attention" / "exercises_2_flash_attention.ipynb"


def test_probe_counts_matmul_work_of_every_spelling():
    a, b = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4)
    for fn in (lambda: a @ b.transpose(-1, -2), lambda: torch.matmul(a, b.transpose(-1, -2)),
               lambda: torch.einsum("bhqd,bhkd->bhqk", a, b), lambda: torch.einsum("...qd,...kd->...qk", a, b),
               lambda: torch.bmm(a.reshape(6, 5, 4), b.reshape(6, 6, 4).transpose(1, 2))):
        with AttentionProbe() as p:
            fn()
        assert p.macs == 2 * 3 * 5 * 6 * 4
    with AttentionProbe() as p:
        (a * 2).exp().sum()
    assert p.macs == 0 and p.largest == a.numel()


def test_one_shot_blocks_tell_one_pass_from_two():
    x = torch.randn(3, 20)
    stream = OneShotBlocks(x, 3)
    m = torch.full((3,), -math.inf)
    for blk in stream:
        m = torch.maximum(m, blk.amax(-1))
    assert stream.blocks == 7 and stream.max_alive <= 1 and torch.equal(m, x.amax(-1))
    with pytest.raises(ValueError, match="only once"):
        for _ in stream:
            pass
    stream = OneShotBlocks(x, [2, 5])
    kept = list(stream)
    assert [b.shape[-1] for b in kept] == [2, 5, 2, 5, 2, 4] and stream.max_alive == 5


def test_tile_bound_excludes_query_only_tiling_and_per_head_matrices():
    bound = tile_bound(1, 1, 128, 128, 4, 4, 8, 4)
    assert bound == 512 and 8 * 128 > bound and 128 * 128 > bound
    assert tile_bound(2, 3, 21, 21, 8, 8, 64, 64) == 6 * 21 * 21      # one tile covers everything


@pytest.mark.parametrize("n_q,n_k,bq,bk", [(128, 128, 8, 4), (9, 21, 4, 5), (40, 96, 8, 4), (37, 37, 8, 5)])
def test_visible_tiles_match_sdpa_masks(n_q, n_k, bq, bk):
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left
    for align, bias in (("bottom_right", causal_lower_right(n_q, n_k)), ("top_left", causal_upper_left(n_q, n_k))):
        mask = bias._materialize(torch.device("cpu"))
        needed = sum(min(bq, n_q - i0) * min(bk, n_k - j0)
                     for i0 in range(0, n_q, bq) for j0 in range(0, n_k, bk)
                     if bool(mask[i0:i0 + bq, j0:j0 + bk].any()))
        assert visible_tile_macs(n_q, n_k, bq, bk, align=align) == (needed, n_q * n_k)
    assert visible_tile_macs(128, 128, 8, 4)[0] * 1.5 < 128 * 128     # computing all tiles breaks the 1.5x bound
    assert causal_visible(0, 4, 4, 4, 4, 8, True) and not causal_visible(0, 4, 4, 4, 4, 8, True, "top_left")


def _model_answer(grade_id):
    from solutions_lib.course import notebooks as nbs
    cell = next(c for c in nbs.read(NB2).cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    src = "\n".join(l for l in cell.source.split("\n") if "### " not in l)
    env = {"math": math, "torch": torch, "F": F, "random_qkv": _random_qkv}
    exec(compile(src.split("\n\n\nq_demo")[0], grade_id, "exec"), env)
    return env


def _random_qkv(batch, heads, n_q, n_k, d, d_v=None, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    shapes = [(batch, heads, n_q, d), (batch, heads, n_k, d), (batch, heads, n_k, d_v or d)]
    return [torch.randn(*s, generator=g, dtype=torch.float64).requires_grad_(requires_grad) for s in shapes]


@pytest.mark.parametrize("n_q,n_k,bq,bk", [(9, 21, 4, 5), (40, 96, 8, 4), (21, 21, 5, 4), (1, 17, 3, 3)])
def test_exercises2_model_answers_are_bottom_right_like_sdpa(n_q, n_k, bq, bk):
    from torch.nn.attention.bias import causal_lower_right
    fwd, bwd = _model_answer("fa2_forward")["fa2_forward"], _model_answer("fa2_backward")["fa2_backward"]
    q, k, v = _random_qkv(2, 2, n_q, n_k, 8, 6, seed=n_q + n_k)
    do = torch.randn(2, 2, n_q, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    o, L = fwd(q, k, v, bq, bk, causal=True)
    qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
    want = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=causal_lower_right(n_q, n_k))
    want.backward(do)
    torch.testing.assert_close(o, want.detach(), rtol=1e-10, atol=1e-12)
    for got, t in zip(bwd(q, k, v, o, L, do, bq, bk, causal=True), (qq, kk, vv)):
        torch.testing.assert_close(got, t.grad, rtol=1e-10, atol=1e-12)
