"""solutions_lib.debugging: checks catch planted bugs, clipping matches torch, timers add up,
the small run is reproducible, the checklist flags bad configurations."""
import copy
import time

import pytest
import torch
import torch.nn.functional as F

from solutions_lib import debugging as D

torch.set_num_threads(1)


def rows(seed=0, b=4, t=12, vocab=50):
    return torch.randint(0, vocab, (b, t + 1), generator=torch.Generator().manual_seed(seed))


def test_label_shift_ok_and_bugs():
    r = rows()
    x, y, _ = D.make_lm_batch(r)
    assert D.label_shift_problems(x, y) == []
    assert any("not shifted" in p for p in D.label_shift_problems(x, x.clone()))
    assert D.label_shift_problems(r[:, 1:], r[:, :-1]) != []  # wrong direction
    assert D.label_shift_problems(r[:, :-2], r[:, 2:]) != []  # shifted by two
    assert D.label_shift_problems(x, y[:, :-1]) != []  # shape
    y2 = y.clone()
    y2[:, 3] = -100
    assert D.label_shift_problems(x, y2) == []  # ignored targets are not checked
    with pytest.raises(ValueError):
        D.label_shift_problems(x[0], y[0])


def test_causal_mask():
    T = 7
    good = torch.ones(T, T, dtype=torch.bool).tril()
    assert D.causal_mask_problems(good) == []
    additive = torch.zeros(T, T).masked_fill(~good, float("-inf"))
    assert D.causal_mask_problems(additive) == []
    assert any("future" in p for p in D.causal_mask_problems(torch.ones(T, T, dtype=torch.bool).tril(1)))
    assert any("off by one" in p for p in D.causal_mask_problems(torch.ones(T, T, dtype=torch.bool).tril(-1)))
    assert D.causal_mask_problems(good.T) != []
    assert D.causal_mask_problems(torch.ones(T, T, dtype=torch.bool)) != []
    assert D.causal_mask_problems(good[:, :-1]) != []
    # the same convention as torch's scaled_dot_product_attention is_causal=True
    q = torch.randn(1, 1, T, 4)
    assert torch.allclose(F.scaled_dot_product_attention(q, q, q, attn_mask=good),
                          F.scaled_dot_product_attention(q, q, q, is_causal=True), atol=1e-6)


def test_padding_mask():
    r = rows(1)
    r[0, 8:] = 0
    r[2, 5:] = 0
    r[r == 0] = 0
    r[:, :1] = torch.clamp(r[:, :1], min=1)
    x, y, m = D.make_lm_batch(r, pad_id=0)
    assert D.padding_mask_problems(x, y, m, pad_id=0) == []
    assert any("attended" in p for p in D.padding_mask_problems(x, y, torch.ones_like(m), pad_id=0))
    assert any("pad token" in p for p in D.padding_mask_problems(x, r[:, 1:], m, pad_id=0))
    assert D.padding_mask_problems(x, y, torch.zeros_like(m), pad_id=0) != []


def _batch_from_lengths(texts, T, pad):
    """Independent oracle: rows of T+1 tokens from texts (each ending with its EOS) padded with
    `pad`; real = position < len(text). Returns rows, inputs, targets, mask built position by position."""
    rows = torch.full((len(texts), T + 1), pad, dtype=torch.long)
    x, y = torch.full((len(texts), T), pad, dtype=torch.long), torch.full((len(texts), T), -100, dtype=torch.long)
    m = torch.zeros((len(texts), T), dtype=torch.long)
    for b, t in enumerate(texts):
        rows[b, :len(t)] = torch.tensor(t)
        for i in range(T):
            x[b, i] = int(rows[b, i])
            m[b, i] = int(i < len(t))
            if i + 1 < len(t):
                y[b, i] = int(rows[b, i + 1])
    return rows, x, y, m


@pytest.mark.parametrize("eos", [2, 0])
def test_padding_when_pad_is_eos(eos):
    # pad id == EOS id (GPT-2/LLaMA tokenizers set up that way): the EOS after a text is real
    g = torch.Generator().manual_seed(5)
    for _ in range(20):
        T = int(torch.randint(4, 20, (1,), generator=g))
        texts = []
        for _ in range(3):
            n = int(torch.randint(1, T + 1, (1,), generator=g))      # text tokens, then its EOS
            texts.append(torch.randint(3, 50, (n,), generator=g).tolist() + [eos])
        rows, x0, y0, m0 = _batch_from_lengths(texts, T, eos)
        x, y, m = D.make_lm_batch(rows, pad_id=eos, eos_id=eos)
        assert torch.equal(x, x0) and torch.equal(m, m0)
        # the oracle cannot see the token after the window: where text fills it, the target is kept
        keep = y0 != -100
        assert torch.equal(y[keep], y0[keep])
        assert ((y == -100) <= ((y0 == -100) | (m0 == 1))).all()
        assert D.padding_mask_problems(x, y, m, eos, eos_id=eos) == []
        # the classic collator bug (mask and labels from `token != pad`) drops every EOS
        xc, yc, mc = D.make_lm_batch(rows, pad_id=eos)
        if not torch.equal(mc, m0):
            assert any("masked out" in p for p in D.padding_mask_problems(xc, yc, mc, eos, eos_id=eos))
        if bool((m0 == 0).any()):
            assert any("attended" in p for p in D.padding_mask_problems(x, y, torch.ones_like(m), eos, eos_id=eos))
            assert any("pad token" in p for p in D.padding_mask_problems(x, rows[:, 1:], m, eos, eos_id=eos))
    # without eos_id the old rule holds unchanged
    rows, x0, y0, m0 = _batch_from_lengths([[5, 6, 1], [7, 1]], 4, 0)
    assert D.make_lm_batch(rows, pad_id=0)[2].tolist() == m0.tolist()


def test_clip_matches_torch():
    torch.manual_seed(0)
    m1 = D.TinyLM(vocab=20, hidden=16)
    x, y, _ = D.make_lm_batch(rows(2, vocab=20))
    F.cross_entropy(m1(x).flatten(0, 1), y.flatten()).mul(50).backward()
    m2 = copy.deepcopy(m1)
    for a, b in zip(m1.parameters(), m2.parameters()):
        b.grad = a.grad.clone()
    pre, post = D.clip_grad_norm(m1.parameters(), 0.5)
    ref = torch.nn.utils.clip_grad_norm_(m2.parameters(), 0.5)
    assert pre == pytest.approx(float(ref), rel=1e-5)
    assert post == pytest.approx(0.5, rel=1e-4)
    for a, b in zip(m1.parameters(), m2.parameters()):
        assert torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-8)
    with pytest.raises(ValueError):
        D.clip_grad_norm(m1.parameters(), 0)


def test_grad_norm_trace():
    torch.manual_seed(0)
    m = D.TinyLM(vocab=20, hidden=16)
    batches = [D.make_lm_batch(rows(s, vocab=20))[:2] for s in range(5)]
    tr = D.grad_norm_trace(m, batches, max_norm=0.3)
    for r in tr:
        assert r["post"] == pytest.approx(min(r["pre"], 0.3), rel=1e-4)
        assert r["ratio"] == pytest.approx(r["post"] / r["pre"])


def test_step_timer_sums_to_step():
    torch.manual_seed(0)
    cfg = D.LaunchConfig()
    model, opt, loader = D._setup(cfg, 0)
    timer = D.StepTimer()
    for _ in range(6):
        with timer.step(tokens=cfg.micro_batch * cfg.seq_len):
            with timer.phase("data"):
                x, y = D._batch(loader.next(), cfg)
            with timer.phase("forward"):
                loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            with timer.phase("backward"):
                loss.backward()
            with timer.phase("optimizer"):
                opt.step()
                opt.zero_grad()
            with timer.phase("checkpoint"):
                time.sleep(0.002)
    s = timer.summary(skip=1)
    assert all(s[p] > 0 for p in D.PHASES)
    assert s["phase_sum"] <= s["step"] and s["phase_sum"] == pytest.approx(s["step"], rel=0.1)
    assert s["checkpoint"] >= 0.002
    assert s["tokens_per_s"] == pytest.approx(cfg.micro_batch * cfg.seq_len / s["step"], rel=1e-9)
    with pytest.raises(ValueError):
        with timer.phase("data"):
            pass
    with pytest.raises(ValueError):
        with timer.step(1):
            with timer.phase("comms"):
                pass


def test_reproducible_small_run():
    cfg = D.LaunchConfig()
    a, na = D.train_small(cfg)
    b, _ = D.train_small(cfg)
    c, _ = D.train_small(cfg, seed=1, steps=10)
    assert len(a) == 100 and a[-1] < a[0]
    assert a == b and a[:10] != c
    assert all(n > 0 for n in na)


def test_resume():
    cfg = D.LaunchConfig(steps=30)
    s, r = D.resume_matches(cfg)
    assert s == r
    s, r = D.resume_matches(cfg.with_(checkpoint_includes=("model", "scheduler", "rng", "dataloader")))
    assert s != r


def test_lr_and_memory():
    cfg = D.LaunchConfig()
    lrs = [D.lr_at(i, cfg) for i in range(cfg.steps)]
    assert lrs[0] == pytest.approx(cfg.peak_lr / cfg.warmup_steps) and max(lrs) == pytest.approx(cfg.peak_lr)
    assert lrs[-1] >= cfg.min_lr
    # 16 bytes/param + Korthikanti activations, by hand
    want = 16 * 1.3e9 + 24 * (34 * 2048 * 2048 + 5 * 16 * 2048 ** 2)
    assert D.memory_estimate_bytes(cfg) == pytest.approx(want)
    assert D.memory_estimate_bytes(cfg, counts=("weights",)) == pytest.approx(2 * 1.3e9)


def test_loader_covers_epoch():
    ld = D.RowLoader(torch.arange(40)[:, None], 8, seed=3)
    seen = torch.cat([ld.next_indices() for _ in range(5)])
    assert sorted(seen.tolist()) == list(range(40))


BAD = {
    "lr_schedule": dict(warmup_steps=1000),
    "tokens_per_step": dict(micro_batch=4),
    "labels_and_masks": dict(shift_labels=False),
    "data_coverage": dict(replacement=True),
    "memory_fits": dict(target_params=7e9),
    "parallelism": dict(world_size=2),
    "logging": dict(logged=("train_loss",)),
    "resume_exact": dict(checkpoint_includes=("model", "scheduler", "rng", "dataloader")),
}


def test_checklist_good_and_bad():
    cfg = D.LaunchConfig()
    res = D.run_launch_checklist(cfg)
    assert all(ok for _, ok, _ in res), [r for r in res if not r[1]]
    assert {n for n, _, _ in res} >= set(BAD) | {"small_run_learns", "checkpoint_contents"}
    for name, kw in BAD.items():
        failed = {n for n, ok, _ in D.run_launch_checklist(cfg.with_(steps=100, **kw)) if not ok}
        assert name in failed, (name, failed)
    assert D.memory_estimate_bytes(cfg, counts=("weights",)) < D.memory_estimate_bytes(cfg)


@pytest.mark.parametrize("kw", [dict(steps=0), dict(micro_batch=-1), dict(hidden=30, heads=4), dict(peak_lr=0.0),
                                dict(warmup_steps=-1), dict(min_lr=-1.0), dict(world_size=1.5)])
def test_config_rejects_malformed(kw):
    with pytest.raises(ValueError):
        D.LaunchConfig(**kw)


def test_lr_at_rejects_negative_step():
    with pytest.raises(ValueError):
        D.lr_at(-1, D.LaunchConfig())
