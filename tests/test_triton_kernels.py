"""The Triton reference kernels of 12 exercises 3 (solutions_lib/triton_kernels.py) against torch
in float64 on odd shapes, and the probe that grades them (solutions_lib/probes_triton.py), in
Triton's CPU interpreter.

TRITON_INTERPRET=1 must be set before triton is first imported. On a machine without CUDA this
module sets it (if triton is not imported yet) and runs in-process; otherwise every test runs in
one child pytest process with the variable set (`test_in_a_child_process`).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton): the Triton kernels "
                                              "are checked where it is")
import triton.language as tl  # noqa: E402

from solutions_lib import probes_triton as P  # noqa: E402
from solutions_lib import triton_kernels as T  # noqa: E402

IN_PROCESS = P.interpreting()
here = pytest.mark.skipif(not IN_PROCESS, reason="triton was imported without the interpreter: run in the child")


@pytest.mark.skipif(IN_PROCESS, reason="the interpreter is on in this process")
def test_in_a_child_process():
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__], env=env,
                          capture_output=True, text=True, timeout=900,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- the kernels against torch

@here
@pytest.mark.parametrize("rows,cols,bn", [(1, 1, 16), (3, 37, 16), (5, 129, 32), (2, 300, 64), (4, 16, 16)])
def test_softmax_matches_torch(rows, cols, bn):
    x = torch.randn(rows, cols, generator=_gen(rows * cols)) * 4
    x[0, cols // 2] += 1000.0
    y = T.softmax(x, bn)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert float((y.double() - torch.softmax(x.double(), -1)).abs().max()) < 1e-6


@here
def test_softmax_fp16_and_a_strided_input():
    x = torch.randn(6, 70, generator=_gen(1)).half()
    assert float((T.softmax(x, 32).double() - torch.softmax(x.double(), -1)).abs().max()) < 1e-3
    xt = torch.randn(40, 9, generator=_gen(2)).T          # (9, 40), column stride 9
    assert float((T.softmax(xt, 16).double() - torch.softmax(xt.double(), -1)).abs().max()) < 1e-6


@here
@pytest.mark.parametrize("M,K,N,blocks", [(37, 45, 29, (16, 16, 16)), (16, 16, 16, (16, 16, 16)),
                                          (33, 70, 17, (16, 16, 32)), (5, 100, 40, (32, 16, 16)), (1, 3, 1, (16, 16, 16))])
def test_matmul_matches_torch(M, K, N, blocks):
    g = _gen(M + K + N)
    a, b = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
    c = T.matmul(a, b, *blocks)
    assert c.shape == (M, N) and float((c.double() - a.double() @ b.double()).abs().max()) < 1e-4


@here
def test_matmul_transposed_inputs():
    g = _gen(7)
    a, b = torch.randn(30, 20, generator=g).T, torch.randn(25, 30, generator=g).T     # (20, 30) @ (30, 25)
    assert float((T.matmul(a, b, 16, 16, 16).double() - a.double() @ b.double()).abs().max()) < 1e-4


@here
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape,blocks", [((1, 2, 40, 24, 40, 24), (16, 16)), ((1, 1, 53, 40, 53, 40), (16, 16)),
                                          ((1, 2, 33, 12, 33, 8), (32, 16)), ((2, 1, 16, 64, 16, 64), (16, 32))])
def test_flash_attention_matches_dense(shape, blocks, causal):
    B, H, sq, d, sk, dv = shape
    g = _gen(sq * d)
    q, k, v = torch.randn(B, H, sq, d, generator=g), torch.randn(B, H, sk, d, generator=g), torch.randn(B, H, sk, dv, generator=g)
    q[..., 0, :] *= 6
    o, lse = T.flash_attention(q, k, v, causal, *blocks)
    o_ref, lse_ref = P.dense_attention(q, k, v, causal)
    assert o.dtype == torch.float32 and lse.dtype == torch.float32
    assert float((o.double() - o_ref).abs().max()) < 1e-5
    assert float((lse.double() - lse_ref).abs().max()) < 1e-5
    sdpa = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    assert float((o_ref - sdpa).abs().max()) < 1e-10     # the oracle is torch's convention


@here
def test_flash_attention_cross_lengths():
    g = _gen(3)
    q, k, v = torch.randn(1, 1, 17, 20, generator=g), torch.randn(1, 1, 70, 20, generator=g), torch.randn(1, 1, 70, 20, generator=g)
    o, lse = T.flash_attention(q, k, v, False, 16, 16)
    o_ref, lse_ref = P.dense_attention(q, k, v)
    assert float((o.double() - o_ref).abs().max()) < 1e-5 and float((lse.double() - lse_ref).abs().max()) < 1e-5


@here
@pytest.mark.parametrize("N,V,bv", [(5, 300, 64), (7, 513, 128), (4, 40, 16), (2, 2000, 256), (3, 1, 16)])
def test_cross_entropy_and_grad_match_torch(N, V, bv):
    g = _gen(N * V)
    logits = torch.randn(N, V, generator=g) * 5
    targets = torch.randint(0, V, (N,), generator=g)
    targets[-1] = -100
    ref = F.cross_entropy(logits.double(), targets, reduction="none")
    assert float((T.cross_entropy(logits, targets, bv).double() - ref).abs().max()) < 1e-4
    z = logits.double().requires_grad_()
    F.cross_entropy(z, targets, reduction="sum").backward()
    grad = T.cross_entropy_grad(logits, targets, bv)
    assert grad.dtype == logits.dtype and float((grad.double() - z.grad).abs().max()) < 1e-6


@here
def test_cross_entropy_large_logits_and_int32_targets():
    logits = torch.randn(3, 1000, generator=_gen(4)) + torch.tensor([100.0, -100.0, 0.0])[:, None]
    t = torch.tensor([3, 999, 512], dtype=torch.int32)
    ref = F.cross_entropy(logits.double(), t.long(), reduction="none")
    assert float((T.cross_entropy(logits, t, 128).double() - ref).abs().max()) < 1e-4


@here
def test_validation():
    x = torch.randn(3, 20)
    for bad in (lambda: T.softmax(x, 24), lambda: T.softmax(x, 8), lambda: T.softmax(x[None], 16),
                lambda: T.softmax(x, True), lambda: T.matmul(x, x, 16, 16, 16), lambda: T.matmul(x, x.T, 16, 16, 12),
                lambda: T.matmul(x, x.T.double(), 16, 16, 16),
                lambda: T.flash_attention(x[None, None], x[None, None, :2], x[None, None], True, 16, 16),
                lambda: T.flash_attention(x[None, None], x[None, None, :, :8], x[None, None], False, 16, 16),
                lambda: T.flash_attention(x[None, None], x[None, None], x[None, None], "yes", 16, 16),
                lambda: T.cross_entropy(x, torch.tensor([1, 2]), 16), lambda: T.cross_entropy(x, torch.ones(3), 16),
                lambda: T.cross_entropy(x, torch.ones(3, dtype=torch.long), 100),
                lambda: T.cross_entropy_grad(x[None], torch.ones(3, dtype=torch.long), 16)):
        with pytest.raises(ValueError):
            bad()


# ---------------------------------------------------------------- what the probe measures

@here
def test_probe_counts_the_reference_kernels_exactly():
    g = _gen(5)
    x = torch.randn(5, 37, generator=g)
    y, p = P.run_watched(T.softmax, x, 16)
    assert (p.launches, p.programs, p.max_load_tile, p.max_store_tile) == (1, [5], 16, 16)
    assert (p.loaded_from(x), p.stored, p.out_of_bounds) == (2 * x.numel(), x.numel(), 0)
    assert p.returned_from_kernel(y) and not p.returned_from_kernel(y + 1)
    a, b = torch.randn(37, 29, generator=g), torch.randn(29, 45, generator=g)
    c, p = P.run_watched(T.matmul, a, b, 16, 32, 16)
    assert p.programs == [3 * 2] and p.max_load_tile == 16 * 32 and p.stored == 37 * 45
    assert p.loaded_from(a) == a.numel() * 2 and p.loaded_from(b) == b.numel() * 3
    q, k, v = (torch.randn(1, 2, 40, 24, generator=g) for _ in range(3))
    for causal in (False, True):
        (o, lse), p = P.run_watched(T.flash_attention, q, k, v, causal, 16, 16)
        assert p.programs == [3 * 2] and p.max_load_tile == 16 * 32 and p.stored == 2 * 40 * 25
        assert p.loaded_from(k) == 2 * P.attention_key_bound(40, 40, 16, 16, causal) * 24
        assert p.returned_from_kernel(o) and p.returned_from_kernel(lse)
    assert P.attention_key_bound(40, 40, 16, 16, True) == 16 + 32 + 40 < 3 * 40
    logits, t = torch.randn(6, 300, generator=g), torch.randint(0, 300, (6,), generator=g)
    loss, p = P.run_watched(T.cross_entropy, logits, t, 64)
    assert p.max_load_tile == 64 and p.loaded_from(logits) == logits.numel() and p.stored == 12   # loss and lse
    grad, p = P.run_watched(T.cross_entropy_grad, logits, t, 64)
    assert p.loaded_from(logits) == 2 * logits.numel() and p.stored == logits.numel()


@triton.jit
def _unmasked_double(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs) * 2)


@triton.jit
def _whole_row_softmax(X, Y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * n + cols, mask=cols < n, other=float("-inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(Y + row * n + cols, e / tl.sum(e, 0), mask=cols < n)


@triton.jit
def _ce_with_scratch(Z, T_, LOSS, P_, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -1e30, tl.float32)
    l = tl.zeros([BLOCK], tl.float32)
    for s in range(0, n, BLOCK):
        c = s + offs
        z = tl.load(Z + row * n + c, mask=c < n, other=float("-inf"))
        mn = tl.maximum(m, z)
        l = l * tl.exp(m - mn) + tl.exp(z - mn)
        m = mn
    mr = tl.max(m, 0)
    lse = mr + tl.log(tl.sum(l * tl.exp(m - mr), 0))
    for s in range(0, n, BLOCK):
        c = s + offs
        z = tl.load(Z + row * n + c, mask=c < n, other=float("-inf"))
        tl.store(P_ + row * n + c, tl.exp(z - lse), mask=c < n)
    t = tl.load(T_ + row)
    tl.store(LOSS + row, -tl.log(tl.load(P_ + row * n + t)))


@here
def test_probe_catches_the_shortcuts():
    # a missing mask: stray lanes counted, not performed (no corruption), the real lanes still run
    x, y = torch.randn(20), torch.zeros(20)
    with P.watch() as p:
        _unmasked_double[(1,)](x, y, BLOCK=32)
    assert p.out_of_bounds == 24 and "mask it" in p.oob_examples[0] and torch.equal(y, 2 * x)
    # the tutorial softmax: one block per row, whatever block size was asked for
    x = torch.randn(3, 37)
    y = torch.empty_like(x)
    with P.watch() as p:
        _whole_row_softmax[(3,)](x, y, 37, BLOCK=64)
    assert p.max_load_tile == 64 > 16
    # a cross-entropy that materialises the softmax: N x V stores
    logits, t = torch.randn(4, 100), torch.randint(0, 100, (4,))
    loss, probs = torch.empty(4), torch.empty(4, 100)
    with P.watch() as p:
        _ce_with_scratch[(4,)](logits, t, loss, probs, 100, BLOCK=32)
    assert p.stored == 4 + 400 and p.loaded_from(logits) == 800
    assert float((loss - F.cross_entropy(logits, t, reduction="none")).abs().max()) < 1e-5
    # work done in torch after the kernel is not the kernel's
    y, p = P.run_watched(lambda z: T.softmax(z, 16) * 2.0, x)
    assert not p.returned_from_kernel(y) and "mul" in p.torch_ops
    # the course's own kernels are seen as such
    from solutions_lib import attention_triton
    q = torch.randn(1, 1, 20, 16)
    _, p = P.run_watched(attention_triton.flash_attention_forward, q, q, q, False, block_m=16, block_n=16)
    assert any(f.endswith("attention_triton.py") for f in p.kernel_files)


@here
def test_expect_kernel_passes_the_references_and_fails_a_wrong_store_count():
    from solutions_lib.grading import GradingError
    x = torch.randn(3, 37)
    y, p = P.run_watched(T.softmax, x, 16)
    with pytest.raises(GradingError, match="kernels taken from the course's library"):
        P.expect_kernel(p, [y], "softmax", max_tile=16, stored=x.numel(), banned="softmax")
    p.kernel_files = ["<a notebook cell>"]          # as if the student had written the reference
    P.expect_kernel(p, [y], "softmax", max_tile=16, stored=x.numel(), banned="softmax",
                    reads=((x, x.numel(), 2 * x.numel(), "x"),))
    with pytest.raises(GradingError, match="elements stored"):
        P.expect_kernel(p, [y], "softmax", max_tile=16, stored=x.numel() - 1, banned="softmax")


def test_require_interpreter_says_what_to_do(monkeypatch):
    monkeypatch.setattr(P, "_HAVE_TRITON", False)
    with pytest.raises(AssertionError, match="pip install triton"):
        P.require_interpreter()
    monkeypatch.setattr(P, "_HAVE_TRITON", True)
    monkeypatch.setattr(P, "interpreting", lambda: False)
    with pytest.raises(AssertionError, match="TRITON_INTERPRET=1"):
        P.require_interpreter()


def test_wrappers_refuse_cpu_tensors_without_the_interpreter(monkeypatch):
    monkeypatch.setattr(T, "interpreting", lambda: False)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        T.softmax(torch.randn(2, 20), 16)


@here
def test_bench_triton_on_cpu_runs_the_interpreter_pass():
    lines = []
    assert T.bench_triton(out=lines.append)
    text = "\n".join(lines)
    assert "timings need a GPU" in text and text.count(" ok") == 6
