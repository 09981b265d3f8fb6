"""11 exercises 6: the references of solutions_lib.dist.vocab_parallel and tp_dropout against
one-process oracles (F.embedding, F.cross_entropy with plain autograd on the full logits), and the
probes of solutions_lib.dist.probes_vocab against the shortcuts they must catch.
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist import probes_vocab as P
from solutions_lib.dist.fake_world import FakeWorld
from solutions_lib.dist.tp_dropout import TPDropoutRNG
from solutions_lib.dist.vocab_parallel import VocabParallelEmbedding, vocab_parallel_cross_entropy, vocab_range
from solutions_lib.grading import GradingError

pytestmark = pytest.mark.xdist_group("vocab_parallel")


def _ce_rank(rank, world, n, vocab, seed):
    logits, targets, c = P.ce_case(seed, n, vocab, world)
    k = vocab // world
    shard = logits[:, rank * k:(rank + 1) * k].clone().requires_grad_(True)
    with CommCounter() as fwd:
        loss = vocab_parallel_cross_entropy(shard, targets)
    with CommCounter() as bwd:
        (loss * c).backward()
    return float(loss), shard.grad, fwd.summary(), bwd.summary()


@pytest.mark.parametrize("world,n,vocab", [(2, 5, 12), (4, 9, 20)])
def test_cross_entropy_matches_one_process(world, n, vocab):
    logits, targets, c = P.ce_case(3, n, vocab, world)
    full = logits.clone().requires_grad_(True)
    ref = F.cross_entropy(full, targets)
    (ref * c).backward()
    k = vocab // world
    for r, (loss, grad, fwd, bwd) in enumerate(launch(_ce_rank, world, args=(n, vocab, 3))):
        assert loss == pytest.approx(float(ref.detach()), rel=1e-12)
        torch.testing.assert_close(grad, full.grad[:, r * k:(r + 1) * k], rtol=1e-12, atol=1e-14)
        # 3N numbers forward (max, then sum of exp and target logit together), nothing backward
        assert fwd == {"all_reduce": (2, 3 * n * 8)} and bwd == {}


def test_boundary_ids_cover_every_shard_edge():
    assert P.boundary_ids(12, 3) == [0, 3, 4, 7, 8, 11]
    logits, targets, _ = P.ce_case(0, 10, 12, 3)
    assert set(P.boundary_ids(12, 3)) <= set(targets.tolist())


def _emb_rank(rank, world, vocab, hidden, tokens):
    torch.manual_seed(0)
    emb = nn.Embedding(vocab, hidden).double()
    layer = VocabParallelEmbedding(emb)
    y = layer(tokens)
    y.pow(2).sum().backward()
    return y.detach(), layer.weight.grad


def test_embedding_matches_one_process():
    torch.manual_seed(0)
    emb = nn.Embedding(12, 3).double()
    tokens = torch.tensor([[0, 5, 6, 11], [3, 3, 9, 2]])
    y = emb(tokens)
    y.pow(2).sum().backward()
    for r, (yr, gr) in enumerate(launch(_emb_rank, 2, args=(12, 3, tokens))):
        torch.testing.assert_close(yr, y.detach(), rtol=0, atol=0)
        torch.testing.assert_close(gr, emb.weight.grad[r * 6:(r + 1) * 6], rtol=1e-12, atol=0)


def test_validation():
    with pytest.raises(ValueError):
        vocab_range(10, 0, 4)
    with FakeWorld(4):
        with pytest.raises(ValueError, match="divide"):
            VocabParallelEmbedding(nn.Embedding(10, 2))
        layer = VocabParallelEmbedding(nn.Embedding(12, 2))
        with pytest.raises(ValueError, match="token ids"):
            layer(torch.tensor([12]))
        with pytest.raises(ValueError, match="targets"):
            vocab_parallel_cross_entropy(torch.zeros(3, 2), torch.tensor([0, 1, 8]))
        with pytest.raises(ValueError, match="shape"):
            vocab_parallel_cross_entropy(torch.zeros(3, 2), torch.tensor([0, 1]))
    with pytest.raises(ValueError):
        TPDropoutRNG(1, -1, 0)
    with pytest.raises(ValueError):
        with TPDropoutRNG(1, 0, 0).fork("attention"):
            pass


def test_probes_pass_the_references():
    P.check_embedding(VocabParallelEmbedding, 2, dict(seed=0, vocab=16, hidden=3, shape=(2, 5)))
    P.check_cross_entropy(vocab_parallel_cross_entropy, 2, dict(seed=0, n=6, vocab=16, dtype="float64"))
    P.check_cross_entropy(vocab_parallel_cross_entropy, 4,
                          dict(seed=1, n=7, vocab=24, dtype="float32", offset=150.0, scale=5.0))
    P.check_dropout_rng(TPDropoutRNG, [(2, 2), (1, 4)], 1234)


def _gather_ce(shard, targets):
    parts = [torch.empty_like(shard) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, shard.detach())
    parts[dist.get_rank()] = shard
    return F.cross_entropy(torch.cat(parts, 1), targets)


def test_probe_catches_gathered_logits():
    with pytest.raises(GradingError, match="largest tensor"):
        P.check_cross_entropy(_gather_ce, 2, dict(seed=0, n=6, vocab=16, dtype="float64"))


class _SameSeed:
    """A slip: one seed for every rank and region."""

    def __init__(self, base_seed, dp_rank, tp_rank):
        self.tdr = TPDropoutRNG(base_seed, 0, 0)

    def fork(self, region):
        return self.tdr.fork("replicated")


def test_probe_catches_one_seed_everywhere():
    with pytest.raises(GradingError, match="region masks"):
        P.check_dropout_rng(_SameSeed, [(2, 2)], 7)


def test_tensor_peak_sees_saved_tensors():
    x = torch.randn(4, 6, requires_grad=True)
    with P.TensorPeak() as peak:
        x.exp().sum()
    assert peak.numel == 24
    big = torch.randn(50, 50, requires_grad=True)
    with P.TensorPeak() as peak:
        big.sin()                       # sin saves its (50, 50) input for the backward
    assert peak.numel == 2500
