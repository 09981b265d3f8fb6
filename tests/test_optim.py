"""solutions_lib.optim against independent oracles: torch.optim.AdamW, clip_grad_norm_,
and (for LAMB) the Adam direction read off a torch AdamW copy stepped with lr = 1."""
import copy
import math

import numpy as np
import pytest
import torch

from solutions_lib.optim import Lamb, adamw_step, clip_grad_norm, trust_ratio

torch.set_num_threads(1)


# ---------------------------------------------------------------- adamw_step


def test_adamw_seed_number_tsx01():
    # TSX-01: theta=2.0, g=0.5, lr=1e-3, wd=0.01, first step. m_hat = g, v_hat = g^2, so the
    # Adam part moves by lr * g/(|g| + eps) ~ lr and the decay by lr*wd*theta = 2e-5.
    theta, m, v = adamw_step(2.0, 0.5, 0.0, 0.0, step=1, lr=1e-3, weight_decay=0.01)
    expected = 2.0 * (1 - 1e-3 * 0.01) - 1e-3 * 0.5 / (0.5 + 1e-8)
    assert isinstance(theta, float) and isinstance(m, float) and isinstance(v, float)
    assert theta == pytest.approx(expected, rel=1e-15)
    assert theta == pytest.approx(1.99898, abs=1e-8)
    assert m == pytest.approx(0.05) and v == pytest.approx(0.00025)


def test_adamw_seed_number_th01():
    theta, m, v = adamw_step(1.5, 0.3, 0.0, 0.0, step=1, lr=1e-3, weight_decay=0.1)
    assert theta == pytest.approx(1.5 - 1e-3 * 0.3 / (0.3 + 1e-8) - 1e-3 * 0.1 * 1.5, rel=1e-14)
    assert m / (1 - 0.9) == pytest.approx(0.3) and v / (1 - 0.999) == pytest.approx(0.09)


HYPERS = [
    dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),
    dict(lr=3e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
    dict(lr=1e-1, betas=(0.0, 0.5), eps=1e-3, weight_decay=0.0),
    dict(lr=5e-4, betas=(0.95, 0.9999), eps=0.0, weight_decay=1.0),
]


@pytest.mark.parametrize("hp", HYPERS)
def test_adamw_matches_torch_over_many_steps(hp):
    rng = np.random.default_rng(1234)
    shape = (7, 5)
    p0 = rng.normal(size=shape)
    tp = torch.tensor(p0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.AdamW([tp], **hp)
    p, m, v = p0.copy(), np.zeros(shape), np.zeros(shape)
    for t in range(1, 61):
        g = rng.normal(size=shape) * rng.choice([1e-3, 1.0, 30.0])
        tp.grad = torch.tensor(g)
        opt.step()
        p, m, v = adamw_step(p, g, m, v, t, **hp)
        st = opt.state[tp]
        # torch updates m with lerp (m + (1-b1)(g-m)); the textbook form differs by rounding.
        np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(m, st["exp_avg"].numpy(), rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(v, st["exp_avg_sq"].numpy(), rtol=1e-11, atol=1e-13)


def test_adamw_scalar_matches_torch_and_keeps_float32():
    tp = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.AdamW([tp], lr=0.01, weight_decay=0.05)
    p, m, v = 0.7, 0.0, 0.0
    for t in range(1, 11):
        g = math.sin(t)
        tp.grad = torch.tensor([g], dtype=torch.float64)
        opt.step()
        p, m, v = adamw_step(p, g, m, v, t, lr=0.01, weight_decay=0.05)
        assert p == pytest.approx(tp.item(), rel=1e-13)
    out = adamw_step(np.ones(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.float32),
                     np.zeros(3, np.float32), 1, lr=1e-3)
    assert all(a.dtype == np.float32 for a in out)


def test_adamw_does_not_mutate_inputs():
    p, g, m, v = np.ones(4), np.full(4, 0.5), np.full(4, 0.1), np.full(4, 0.2)
    before = [a.copy() for a in (p, g, m, v)]
    adamw_step(p, g, m, v, 3, lr=0.1)
    for a, b in zip((p, g, m, v), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs", [
    dict(step=0), dict(step=-2), dict(step=1.5), dict(step=True), dict(lr=-1e-3), dict(lr=math.nan),
    dict(betas=(1.0, 0.999)), dict(betas=(0.9, -0.1)), dict(betas=(0.9,)), dict(eps=-1e-8),
    dict(weight_decay=-0.1), dict(grad=np.ones(3)), dict(m=np.zeros((2, 1))), dict(v=-1.0),
    dict(grad="0.5"),
])
def test_adamw_rejects_bad_arguments(kwargs):
    args = dict(param=2.0, grad=0.5, m=0.0, v=0.0, step=1, lr=1e-3)
    args.update(kwargs)
    with pytest.raises(ValueError):
        adamw_step(**args)


# ---------------------------------------------------------------- clip_grad_norm


def _torch_clip(grads, max_norm, norm_type):
    ps = []
    for g in grads:
        p = torch.zeros(g.shape, dtype=torch.float64, requires_grad=True)
        p.grad = torch.tensor(g, dtype=torch.float64)
        ps.append(p)
    total = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    return [p.grad.numpy() for p in ps], float(total)


@pytest.mark.parametrize("norm_type", [2.0, math.inf, 1.0, 3.0])
@pytest.mark.parametrize("max_norm", [0.05, 1.0, 1e3])  # above, around and below the threshold
def test_clip_matches_torch(norm_type, max_norm):
    rng = np.random.default_rng(7)
    for _ in range(5):
        grads = [rng.normal(size=s) * rng.uniform(0.01, 2) for s in [(4, 3), (3,), (2, 2, 2), (1,)]]
        before = [g.copy() for g in grads]
        clipped, total = clip_grad_norm(grads, max_norm, norm_type=norm_type)
        want, want_total = _torch_clip(grads, max_norm, norm_type)
        assert total == pytest.approx(want_total, rel=1e-12)
        for c, w, g, b in zip(clipped, want, grads, before):
            np.testing.assert_allclose(c, w, rtol=1e-12, atol=1e-15)
            np.testing.assert_array_equal(g, b)  # never mutates
            assert c is not g


def test_clip_seed_numbers_and_threshold_behaviour():
    # TSX-02: [6, 8] has norm 10; clipped to 5 it is [3, 4] up to torch's 1e-6.
    out, total = clip_grad_norm(np.array([6.0, 8.0]), 5.0)
    assert isinstance(out, np.ndarray) and total == 10.0
    np.testing.assert_allclose(out, [3.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(out, np.array([6.0, 8.0]) * 5.0 / (10.0 + 1e-6), rtol=1e-15)
    # TH-02: [3, 4, 12] has norm 13, scale 5/13.
    out, total = clip_grad_norm([np.array([3.0, 4.0, 12.0])], 5.0)
    assert total == 13.0 and np.linalg.norm(out[0]) == pytest.approx(5.0, rel=1e-6)
    # Global, not per tensor: [3,4] and [0,0,12] clip together to 5/13 each.
    out, total = clip_grad_norm([np.array([3.0, 4.0]), np.array([0.0, 0.0, 12.0])], 5.0)
    assert total == 13.0
    np.testing.assert_allclose(out[0], [15 / 13, 20 / 13], rtol=1e-6)
    # Below the threshold: unchanged values, new arrays.
    g = [np.array([0.3, -0.4])]
    out, total = clip_grad_norm(g, 1.0)
    assert total == pytest.approx(0.5) and out[0] is not g[0]
    np.testing.assert_array_equal(out[0], g[0])
    # All zeros: no division by zero.
    out, total = clip_grad_norm([np.zeros(3)], 1.0)
    assert total == 0.0 and np.all(out[0] == 0)
    assert clip_grad_norm([], 1.0) == ([], 0.0)


def test_clip_float32_and_nonfinite():
    out, _ = clip_grad_norm([np.full(4, 10.0, np.float32)], 1.0)
    assert out[0].dtype == np.float32
    want, want_total = _torch_clip([np.array([np.inf, 1.0])], 1.0, 2.0)
    with np.errstate(invalid="ignore"):
        out, total = clip_grad_norm([np.array([np.inf, 1.0])], 1.0)
    assert math.isinf(total) and math.isinf(want_total)
    np.testing.assert_array_equal(np.isnan(out[0]), np.isnan(want[0]))
    with pytest.raises(ValueError):
        clip_grad_norm([np.array([np.inf, 1.0])], 1.0, error_if_nonfinite=True)


@pytest.mark.parametrize("args", [
    ([np.ones(2)], -1.0), ([np.ones(2)], math.inf), ([np.ones(2)], math.nan), ([np.ones(2)], "5"),
    ("abc", 1.0), (5.0, 1.0), ([np.array(["a"])], 1.0),
])
def test_clip_rejects_bad_arguments(args):
    with pytest.raises(ValueError):
        clip_grad_norm(*args)


@pytest.mark.parametrize("norm_type", [0, -2.0, "two", math.nan])
def test_clip_rejects_bad_norm_type(norm_type):
    with pytest.raises(ValueError):
        clip_grad_norm([np.ones(2)], 1.0, norm_type=norm_type)


# ---------------------------------------------------------------- LAMB


def _lamb_oracle_step(w, g, shadow, lr, wd):
    """Expected LAMB update of one tensor, using torch's AdamW for the Adam direction.

    `shadow` is a parameter with its own AdamW (lr=1) that has seen the same gradients, so
    its moments equal LAMB's. Set to w and stepped once it lands on w*(1-wd) - adam_dir,
    hence u = w - w_after = adam_dir + wd*w, exactly LAMB's u.
    """
    p, opt = shadow
    with torch.no_grad():
        p.copy_(w)
    p.grad = g.clone()
    opt.step()
    u = w - p.detach()
    wn, un = torch.linalg.vector_norm(w), torch.linalg.vector_norm(u)
    r = wn / un if (wn > 0 and un > 0) else torch.tensor(1.0, dtype=w.dtype)
    return w - lr * r * u, float(r)


@pytest.mark.parametrize("lr,betas,eps,wd", [
    (1e-2, (0.9, 0.999), 1e-6, 0.01),
    (5e-2, (0.8, 0.99), 1e-8, 0.1),
    (1e-3, (0.0, 0.5), 1e-4, 0.0),
])
def test_lamb_matches_adamw_direction_oracle(lr, betas, eps, wd):
    torch.manual_seed(0)
    shapes = [(6, 4), (6,), (3, 6), (3,)]
    params = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    with torch.no_grad():
        params[1].zero_()  # a zero bias: ||w|| = 0 at the first step, so r = 1
    ref = [p.detach().clone() for p in params]
    shadows = []
    for p in params:
        sp = torch.zeros_like(p, requires_grad=True)
        shadows.append((sp, torch.optim.AdamW([sp], lr=1.0, betas=betas, eps=eps, weight_decay=wd)))
    opt = Lamb(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    gen = torch.Generator().manual_seed(1)
    for _ in range(12):
        grads = [torch.randn(s, dtype=torch.float64, generator=gen) * 3 for s in shapes]
        for i, (p, g) in enumerate(zip(params, grads)):
            p.grad = g.clone()
            ref[i], r = _lamb_oracle_step(ref[i], g, shadows[i], lr, wd)
        opt.step()
        for i, p in enumerate(params):
            torch.testing.assert_close(p.detach(), ref[i], rtol=1e-11, atol=1e-13)


def test_trust_ratio():
    assert trust_ratio(np.array([3.0, 4.0]), np.array([1.0, -1.0])) == pytest.approx(5 / math.sqrt(2))
    assert trust_ratio(np.zeros(3), np.ones(3)) == 1.0 and trust_ratio(np.ones(3), np.zeros(3)) == 1.0
    w, u = torch.randn(4, 5, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
    assert trust_ratio(w, u) == pytest.approx(float(w.norm() / u.norm()), rel=1e-14)
    for bad in [(np.ones(2), np.ones(3)), (np.array([np.nan, 1.0]), np.ones(2)), ("w", "u")]:
        with pytest.raises(ValueError):
            trust_ratio(*bad)


def test_lamb_relative_step_is_lr():
    torch.manual_seed(3)
    w = torch.randn(10, 10, dtype=torch.float64, requires_grad=True)
    opt = Lamb([w], lr=0.02, weight_decay=0.05)
    for _ in range(5):
        old = w.detach().clone()
        w.grad = torch.randn(10, 10, dtype=torch.float64)
        opt.step()
        moved = torch.linalg.vector_norm(w.detach() - old)
        assert float(moved) == pytest.approx(0.02 * float(torch.linalg.vector_norm(old)), rel=1e-12)
        assert float(opt.state[w]["trust_ratio"]) > 0


def test_lamb_zero_norm_cases():
    # ||w|| = 0: r = 1, the step is the plain Adam-direction step (first step: ~lr*sign(g)).
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = Lamb([w], lr=0.1, eps=0.0, weight_decay=0.5)
    w.grad = torch.tensor([2.0, -0.5, 1e-3], dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(w.detach(), torch.tensor([-0.1, 0.1, -0.1], dtype=torch.float64))
    assert float(opt.state[w]["trust_ratio"]) == 1.0
    # ||u|| = 0 (zero gradient, no decay): r = 1 and nothing moves, no nan.
    v = torch.ones(4, dtype=torch.float64, requires_grad=True)
    opt = Lamb([v], lr=0.1, weight_decay=0.0)
    v.grad = torch.zeros(4, dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(v.detach(), torch.ones(4, dtype=torch.float64))
    assert float(opt.state[v]["trust_ratio"]) == 1.0
    # Parameters without a gradient are skipped.
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    opt = Lamb([a, b], lr=0.1)
    a.grad = torch.ones(2)
    opt.step()
    assert torch.equal(b.detach(), torch.ones(2)) and b not in opt.state


def test_lamb_hand_example_and_closure():
    # w = [3, 4], g = [0.5, -2], no decay, eps = 0: u = sign(g) = [1, -1], r = 5 / sqrt(2).
    w = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    opt = Lamb([w], lr=0.1, eps=0.0, weight_decay=0.0)

    def closure():
        opt.zero_grad()
        loss = (w * torch.tensor([0.5, -2.0], dtype=torch.float64)).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss.detach()) == pytest.approx(1.5 - 8.0)
    d = 0.1 * 5 / math.sqrt(2)
    torch.testing.assert_close(w.detach(), torch.tensor([3 - d, 4 + d], dtype=torch.float64))


def test_lamb_state_dict_roundtrip():
    torch.manual_seed(5)
    w = torch.randn(5, requires_grad=True)
    opt = Lamb([w], lr=0.01)
    for _ in range(3):
        w.grad = torch.randn(5)
        opt.step()
    w2 = w.detach().clone().requires_grad_(True)
    opt2 = Lamb([w2], lr=0.01)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    g = torch.randn(5)
    w.grad, w2.grad = g.clone(), g.clone()
    opt.step()
    opt2.step()
    torch.testing.assert_close(w, w2)


@pytest.mark.parametrize("kwargs", [
    dict(lr=-0.1), dict(betas=(1.0, 0.9)), dict(betas=(0.9, 1.5)), dict(eps=-1.0), dict(weight_decay=-0.01),
    dict(lr=math.inf),
])
def test_lamb_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        Lamb([torch.zeros(2, requires_grad=True)], **kwargs)


def _rescaled_linear_run(opt_factory, c, steps=8):
    """A 2-layer linear net y = W2 (W1 x + b1) + b2, with layer 1 times c and W2 divided by c
    (the same function for every c, as in 01_optimizers Part 4), trained for `steps` updates."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(64, 5, generator=gen, dtype=torch.float64)
    y = torch.randn(64, 2, generator=gen, dtype=torch.float64)
    w1 = (torch.randn(7, 5, generator=gen, dtype=torch.float64) * c).requires_grad_(True)
    b1 = (torch.randn(7, generator=gen, dtype=torch.float64) * c).requires_grad_(True)
    w2 = (torch.randn(2, 7, generator=gen, dtype=torch.float64) / c).requires_grad_(True)
    b2 = torch.randn(2, generator=gen, dtype=torch.float64).requires_grad_(True)
    opt = opt_factory([w1, b1, w2, b2])
    for _ in range(steps):
        opt.zero_grad()
        loss = ((x @ w1.T + b1) @ w2.T + b2 - y).pow(2).mean()
        loss.backward()
        opt.step()
    return w1.detach() / c, b1.detach() / c, w2.detach() * c, b2.detach()


def test_lamb_is_invariant_to_a_per_layer_rescaling():
    # The claim of 01_optimizers Part 4 (b): the trust ratio makes every tensor move by lr * ||w||,
    # so rescaling a layer by c (and the next by 1/c) maps LAMB's whole trajectory by the same
    # factors (exactly with eps = 0 and no decay: Adam's direction ignores the gradient's scale).
    # AdamW moves each coordinate by ~lr whatever the layer's norm, so its trajectory is not.
    def lamb(p):
        return Lamb(p, lr=0.05, eps=0.0, weight_decay=0.0)

    def adamw(p):
        return torch.optim.AdamW(p, lr=0.05, eps=0.0, weight_decay=0.0)

    for c in (100.0, 0.01):
        for a, b in zip(_rescaled_linear_run(lamb, 1.0), _rescaled_linear_run(lamb, c)):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
        diff = max(float((a - b).abs().max()) for a, b in zip(_rescaled_linear_run(adamw, 1.0), _rescaled_linear_run(adamw, c)))
        assert diff > 0.05
