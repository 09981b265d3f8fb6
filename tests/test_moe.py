"""solutions_lib.moe against oracles written the long way (solutions_lib.probes_moe) and closed forms."""
import math

import pytest
import torch

from solutions_lib import moe
from solutions_lib import probes_moe as P


def _logits(seed, T=23, E=6):
    return torch.randn(T, E, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_route_matches_dense_oracle_and_gradient(k):
    z = _logits(1).requires_grad_(True)
    g, i = moe.top_k_route(z, k)
    g2, i2 = P.dense_route(z, k)
    assert torch.equal(i, i2)
    torch.testing.assert_close(g, g2)
    torch.testing.assert_close(g.sum(1), torch.ones(23, dtype=torch.float64))
    w = torch.randn(23, k, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    (gz,) = torch.autograd.grad((g * w).sum(), z)
    (gz2,) = torch.autograd.grad((g2 * w).sum(), z)
    torch.testing.assert_close(gz, gz2)
    if k > 1:
        assert gz.abs().max() > 0           # the router learns through the gates


def test_route_literal():
    z = torch.log(torch.tensor([[1.0, 2.0, 4.0, 1.0]], dtype=torch.float64))
    g, i = moe.top_k_route(z, 2)
    assert i.tolist() == [[2, 1]]
    torch.testing.assert_close(g, torch.tensor([[4 / 6, 2 / 6]], dtype=torch.float64))


@pytest.mark.parametrize("bad", [lambda: moe.top_k_route(torch.zeros(3, 4), 0), lambda: moe.top_k_route(torch.zeros(3, 4), 5),
                                 lambda: moe.top_k_route(torch.zeros(4), 1), lambda: moe.top_k_route(torch.zeros(3, 4), True),
                                 lambda: moe.expert_capacity(8, 4, 2, 0), lambda: moe.expert_capacity(8, 0, 2, 1.0),
                                 lambda: moe.capacity_keep(torch.tensor([[5]]), 4, 1),
                                 lambda: moe.capacity_keep(torch.tensor([[1]]), 4, -1),
                                 lambda: moe.load_report(torch.tensor([[1]]), 4, 3, 1.0)])
def test_bad_input_raises(bad):
    with pytest.raises(ValueError):
        bad()


def test_capacity_rounds_up_and_keeps_gshard_order():
    assert moe.expert_capacity(6, 4, 1, 1.25) == 2          # 1.875 -> 2
    assert moe.expert_capacity(8, 4, 2, 1.0) == 4           # exact
    assert moe.expert_capacity(10, 1, 1, 1.1) == 11         # float noise is not rounded up
    e = torch.tensor([[0, 1], [0, 2], [0, 1], [1, 0]])
    keep = moe.capacity_keep(e, 3, 2)
    # first choices: tokens 0, 1 take expert 0's two slots, token 2's first choice is dropped;
    # then second choices: token 0 -> 1, token 1 -> 2, token 2 -> 1 (expert 1 already has token 3's first)
    assert keep.tolist() == [[True, True], [True, True], [False, False], [True, False]]
    for seed in range(5):
        idx = P.dense_route(_logits(seed, 40, 5), 2)[1]
        for c in (0, 3, 9, 40):
            assert torch.equal(moe.capacity_keep(idx, 5, c), P.dense_keep(idx, 5, c))


def test_balancing_loss_closed_forms_and_gradient():
    T, E = 12, 4
    z = torch.zeros(T, E, dtype=torch.float64, requires_grad=True)
    idx = torch.arange(T).remainder(E).unsqueeze(1)
    assert math.isclose(float(moe.balancing_loss(z, idx).detach()), 1.0)      # uniform: 1
    idx_all0 = torch.zeros(T, 1, dtype=torch.long)
    assert math.isclose(float(moe.balancing_loss(z, idx_all0).detach()), 1.0)  # P uniform: E * 1 * 1/E
    z2 = _logits(3, T, E).requires_grad_(True)
    idx2 = P.dense_route(z2, 2)[1]
    f = torch.bincount(idx2.flatten(), minlength=E).double() / idx2.numel()
    manual = E * (f * torch.softmax(z2, 1).mean(0)).sum()
    torch.testing.assert_close(moe.balancing_loss(z2, idx2), manual)
    (g,) = torch.autograd.grad(moe.balancing_loss(z2, idx2), z2)
    (g2,) = torch.autograd.grad(manual, z2)
    torch.testing.assert_close(g, g2)


def test_z_loss():
    z = _logits(4).requires_grad_(True)
    expect = (torch.log(torch.exp(z).sum(1)) ** 2).mean()
    torch.testing.assert_close(moe.router_z_loss(z), expect)
    assert math.isclose(float(moe.router_z_loss(torch.zeros(2, 4))), math.log(4) ** 2, rel_tol=1e-6)


def test_biased_route_and_update():
    z = _logits(5, 30, 6)
    b = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    g, i = moe.biased_route(z, b, 2)
    assert (i[:, 0] == 5).all()                              # the bias wins the choice
    p = torch.softmax(z, 1)
    top = p.gather(1, i)
    torch.testing.assert_close(g, top / top.sum(1, keepdim=True))   # gates from unbiased probabilities
    idx = torch.tensor([[0], [0], [0], [1], [2], [2]])        # loads 3, 1, 2, 0 ; mean 1.5
    new = moe.update_bias(torch.zeros(4, dtype=torch.float64), idx, 4, 0.1)
    torch.testing.assert_close(new, torch.tensor([-0.1, 0.1, -0.1, 0.1], dtype=torch.float64))
    eq = moe.update_bias(torch.zeros(2), torch.tensor([[0], [1]]), 2, 0.5)
    assert eq.tolist() == [0.0, 0.0]


def test_bias_balances_a_skewed_router():
    x, w, _ = P.moe_case(11, 256, 8, 8, skew=6.0)
    b = torch.zeros(8, dtype=torch.float64)
    z = x @ w
    first = moe.load_report(moe.biased_route(z, b, 2)[1], 8, 1, 1.0)["expert_imbalance"]
    for _ in range(300):
        b = moe.update_bias(b, moe.biased_route(z, b, 2)[1], 8, 0.002)
    last = moe.load_report(moe.biased_route(z, b, 2)[1], 8, 1, 1.0)["expert_imbalance"]
    assert first > 2.0 and last < 0.6 * first


@pytest.mark.parametrize("capacity_factor", [None, 1.0, 0.5])
def test_moe_layer_equals_dense_forward_backward(capacity_factor):
    x, w, experts = P.moe_case(7, 29, 6, 5, skew=1.0)
    ow = torch.randn(29, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    cap = None if capacity_factor is None else moe.expert_capacity(29, 5, 2, capacity_factor)
    a = P.one_process_grads(lambda x, w, e: moe.moe_layer(x, w, e, 2, capacity_factor), x, w, experts, ow)
    b = P.one_process_grads(lambda x, w, e: P.dense_moe(x, w, e, 2, cap), x, w, experts, ow)
    for u, v in zip(a[:3], b[:3]):
        torch.testing.assert_close(u, v)
    for u, v in zip(a[3], b[3]):
        torch.testing.assert_close(u, v)
    counted = [P.CountingExpert(e) for e in experts]
    moe.moe_layer(x, w, counted, 2, capacity_factor)
    assert [c.rows for c in counted] == P.expected_rows(x, w, 2, 5, cap)


def test_load_report_literal():
    idx = torch.tensor([[0, 1], [0, 2], [0, 3], [1, 0]])       # loads 4, 2, 1, 1
    r = moe.load_report(idx, 4, 2, 0.5)
    assert r["tokens_per_expert"] == [4, 2, 1, 1] and r["tokens_per_rank"] == [6, 2]
    assert r["expert_imbalance"] == 2.0 and r["rank_imbalance"] == 1.5
    assert r["step_time"] == 3.0 and r["balanced_step_time"] == 2.0
