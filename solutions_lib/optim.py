"""Optimizer mechanics: one AdamW step, global-norm gradient clipping, and LAMB.

Units. Parameters, gradients and the first moment `m` carry the parameter's own unit
(gradients: loss units per parameter unit; here we never mix them, so "the parameter's
unit" is enough). The second moment `v` carries that unit squared. The Adam direction
m_hat / (sqrt(v_hat) + eps) is dimensionless, so in Adam/AdamW the learning rate `lr` is
in parameter units per step; in LAMB the trust ratio ||w||/||u|| restores the parameter's
unit and `lr` becomes a dimensionless fraction of ||w|| per step. Weight decay is per unit
of lr (dimensionless). Norms are Euclidean unless `norm_type` says otherwise.

Sources:
- AdamW: Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019; the
  semantics reproduced exactly are those of `torch.optim.AdamW` (decay first, then the
  bias-corrected Adam step).
- Adam: Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015.
- Clipping: `torch.nn.utils.clip_grad_norm_` (coefficient max_norm / (total + 1e-6),
  clamped at 1); Pascanu et al., "On the difficulty of training RNNs", ICML 2013.
- LAMB: You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76
  minutes", ICLR 2020 (Algorithm 2, with phi = identity).
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

__all__ = ["adamw_step", "clip_grad_norm", "trust_ratio", "Lamb"]

#: What torch adds to the total norm before dividing (clip_grad_norm_): it keeps the
#: coefficient finite when every gradient is zero.
CLIP_EPS = 1e-6


# ---------------------------------------------------------------- validation helpers


def _check_number(x, name: str, *, low: float = -math.inf, low_ok: bool = True) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {type(x).__name__} {x!r:.60}")
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"{name} must be finite, got {x}")
    if x < low or (x == low and not low_ok):
        raise ValueError(f"{name} must be {'>=' if low_ok else '>'} {low:g}, got {x:g}")
    return x


def _check_betas(betas) -> tuple[float, float]:
    try:
        b1, b2 = betas
    except (TypeError, ValueError):
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r:.60}") from None
    out = []
    for name, b in (("beta1", b1), ("beta2", b2)):
        b = _check_number(b, name)
        if not 0.0 <= b < 1.0:
            raise ValueError(f"{name} must lie in [0, 1), got {b:g}")
        out.append(b)
    return out[0], out[1]


def _as_numeric_array(x, name: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a number or an array of numbers ({e})") from None
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ValueError(f"{name} must hold real numbers, got dtype {a.dtype}")
    return a


# ---------------------------------------------------------------- AdamW


def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """One AdamW update, exactly as `torch.optim.AdamW` performs it (amsgrad off).

    With t = `step` (the 1-based count of this update: 1 for the first update), gradient g,
    beta1, beta2 = `betas` and lambda = `weight_decay`::

        theta  <- theta * (1 - lr * lambda)          # decoupled decay, on the old weights
        m      <- beta1 * m + (1 - beta1) * g         # first moment (EMA of g)
        v      <- beta2 * v + (1 - beta2) * g**2      # second moment (EMA of g^2)
        m_hat   = m / (1 - beta1**t)                  # bias corrections: m and v start at 0
        v_hat   = v / (1 - beta2**t)
        theta  <- theta - lr * m_hat / (sqrt(v_hat) + eps)

    The decay never enters m or v (that is what "decoupled" means; Adam with an L2 term
    would add lambda*theta to g instead). The returned `m`, `v` are the raw moments (not
    bias-corrected), i.e. what torch keeps in `state["exp_avg"]`, `state["exp_avg_sq"]`.

    Units: theta, g, m in the parameter's unit; v in its square; lr in parameter units per
    step (the Adam direction is dimensionless); weight_decay per unit of lr; eps in the
    unit of sqrt(v).

    Args:
        param, grad, m, v: floats, or array-likes of one common shape. Nothing is modified.
        step: int >= 1. lr: >= 0. betas: each in [0, 1). eps: >= 0. weight_decay: >= 0.

    Returns:
        (param, m, v) after the update: floats when every input was a scalar, else new
        numpy arrays (floating inputs keep their dtype; integer inputs become float64).

    Non-finite gradients propagate (as in torch); nothing is clipped or checked for inf.

    Source: Loshchilov & Hutter (ICLR 2019), Algorithm 2; torch.optim.AdamW.
    """
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        if isinstance(step, numbers.Real) and not isinstance(step, bool) and float(step).is_integer():
            step = int(step)
        else:
            raise ValueError(f"step must be an integer (the 1-based update count), got {step!r:.60}")
    step = int(step)
    if step < 1:
        raise ValueError(f"step must be >= 1 (1 for the first update: bias correction divides by 1 - beta**step), got {step}")
    lr = _check_number(lr, "lr", low=0.0)
    b1, b2 = _check_betas(betas)
    eps = _check_number(eps, "eps", low=0.0)
    weight_decay = _check_number(weight_decay, "weight_decay", low=0.0)

    raw = {"param": param, "grad": grad, "m": m, "v": v}
    scalar_input = all(np.ndim(x) == 0 and not isinstance(x, (np.ndarray, list, tuple, torch.Tensor))
                       for x in raw.values())
    arrs = {k: _as_numeric_array(x, k) for k, x in raw.items()}
    shapes = {k: a.shape for k, a in arrs.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"param, grad, m and v must have one shape, got {shapes}")
    floats = [a.dtype for a in arrs.values() if np.issubdtype(a.dtype, np.floating)]
    dtype = np.result_type(*floats) if floats else np.dtype(np.float64)
    p, g, m_, v_ = (arrs[k].astype(dtype, copy=True) for k in ("param", "grad", "m", "v"))
    if np.any(v_ < 0):
        raise ValueError("v (the second moment, an average of g**2) must be >= 0")

    p = p * dtype.type(1.0 - lr * weight_decay)
    m_ = dtype.type(b1) * m_ + dtype.type(1.0 - b1) * g
    v_ = dtype.type(b2) * v_ + dtype.type(1.0 - b2) * g * g
    m_hat = m_ / dtype.type(1.0 - b1 ** step)
    v_hat = v_ / dtype.type(1.0 - b2 ** step)
    p = p - dtype.type(lr) * m_hat / (np.sqrt(v_hat) + dtype.type(eps))

    if scalar_input:
        return float(p), float(m_), float(v_)
    return np.asarray(p, dtype=dtype), np.asarray(m_, dtype=dtype), np.asarray(v_, dtype=dtype)


# ---------------------------------------------------------------- clipping


def _parse_norm_type(norm_type) -> float:
    if isinstance(norm_type, str):
        if norm_type.strip().lower() not in ("inf", "infinity"):
            raise ValueError(f"norm_type must be a positive number or 'inf', got {norm_type!r}")
        return math.inf
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real) or math.isnan(norm_type):
        raise ValueError(f"norm_type must be a positive number or 'inf', got {norm_type!r:.60}")
    p = float(norm_type)
    if p <= 0:
        raise ValueError(f"norm_type must be > 0 (2 for the Euclidean norm, inf for the max), got {p:g}")
    return p


def _vector_norm(a: np.ndarray, p: float) -> float:
    a = np.abs(np.asarray(a, dtype=np.float64).ravel())
    if a.size == 0:
        return 0.0
    if math.isinf(p):
        return float(a.max())
    if p == 2.0:
        return float(np.sqrt(np.dot(a, a)))
    return float(np.sum(a ** p) ** (1.0 / p))


def clip_grad_norm(grads, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale a list of gradients so that their *global* norm is at most `max_norm`.

    Semantics of `torch.nn.utils.clip_grad_norm_`::

        total = || (||g_1||_p, ||g_2||_p, ..., ||g_k||_p) ||_p     # all tensors as one vector
        coef  = min(1, max_norm / (total + 1e-6))
        g_i  <- coef * g_i                                         # one coefficient for all

    For p = inf, ||g||_inf = max |g| and total is the max over all tensors. The 1e-6 keeps
    the coefficient finite when every gradient is zero, and makes the clipped norm land a
    hair below max_norm (max_norm * total / (total + 1e-6)). Below the threshold coef = 1
    and the gradients come back unchanged (as new arrays).

    Units: gradients and norms in the gradient's unit; coef is dimensionless.

    Args:
        grads: a list/tuple of array-likes (one per parameter tensor) or a single array.
            The inputs are never modified.
        max_norm: the threshold, >= 0 and finite.
        norm_type: p > 0, or inf / 'inf'.
        error_if_nonfinite: if True, a nan/inf total norm raises ValueError; if False (torch's
            default) it is returned and the gradients are scaled by the resulting coefficient.

    Returns:
        (clipped, total_norm): `clipped` is a list of new arrays (a single array if a single
        array was given); `total_norm` is the norm *before* clipping, a float.

    Source: torch.nn.utils.clip_grad_norm_; Pascanu et al. (ICML 2013).
    """
    single = isinstance(grads, (np.ndarray, torch.Tensor))
    if single:
        items = [grads]
    elif isinstance(grads, (list, tuple)):
        items = list(grads)
    else:
        raise ValueError(f"grads must be a list of arrays or one array, got {type(grads).__name__}")
    max_norm = _check_number(max_norm, "max_norm", low=0.0)
    p = _parse_norm_type(norm_type)
    arrs = [_as_numeric_array(g, f"grads[{i}]") for i, g in enumerate(items)]
    if not arrs:
        return [], 0.0
    norms = [_vector_norm(a, p) for a in arrs]
    total = _vector_norm(np.array(norms), p)
    if error_if_nonfinite and not math.isfinite(total):
        raise ValueError(f"the total {p:g}-norm of the gradients is {total}; they cannot be clipped")
    coef = min(1.0, max_norm / (total + CLIP_EPS)) if not math.isnan(total) else math.nan
    out = []
    for a in arrs:
        dt = a.dtype if np.issubdtype(a.dtype, np.floating) else np.dtype(np.float64)
        out.append(np.asarray(a.astype(dt) * dt.type(coef), dtype=dt))
    return (out[0] if single else out), total


# ---------------------------------------------------------------- LAMB


def trust_ratio(weight, update) -> float:
    """LAMB's layer-wise trust ratio r = ||w|| / ||u|| for one parameter tensor.

    `weight` is the tensor w before the update, `update` the direction u (Adam direction plus
    weight_decay * w); both arrays (or tensors) of one shape. Norms are Euclidean over all
    entries. r = 1 when ||w|| = 0 or ||u|| = 0 (our convention, the one `Lamb` uses), so the
    step lr * r * u then falls back to an un-rescaled step instead of 0/0.

    Units: dimensionless when w and u share a unit; since u is dimensionless in LAMB, r
    carries the parameter's unit and lr * r * u lands in parameter units.

    Source: You et al., ICLR 2020, Algorithm 2 (phi = identity).
    """
    w = _as_numeric_array(weight, "weight").astype(np.float64)
    u = _as_numeric_array(update, "update").astype(np.float64)
    if w.shape != u.shape:
        raise ValueError(f"weight and update must have one shape, got {w.shape} and {u.shape}")
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(u))):
        raise ValueError("weight and update must be finite to form a trust ratio")
    wn, un = _vector_norm(w, 2.0), _vector_norm(u, 2.0)
    return wn / un if wn > 0 and un > 0 else 1.0



class Lamb(torch.optim.Optimizer):
    """LAMB: Adam's direction, rescaled per parameter tensor by a trust ratio.

    For each parameter tensor w (one "layer" in the paper's sense) with gradient g, at
    update t = 1, 2, ...::

        m <- beta1 m + (1 - beta1) g ;   v <- beta2 v + (1 - beta2) g^2
        m_hat = m / (1 - beta1^t) ;      v_hat = v / (1 - beta2^t)
        u = m_hat / (sqrt(v_hat) + eps) + weight_decay * w      # decay is part of u
        r = ||w|| / ||u||     (r = 1 when ||w|| = 0 or ||u|| = 0)
        w <- w - lr * r * u

    Conventions (the paper leaves them open; these are ours):
    - one trust ratio per parameter tensor (a weight matrix and its bias are separate
      "layers"); norms are Euclidean over all entries of the tensor;
    - phi is the identity: no clamp on ||w|| or on r;
    - the bias corrections are always applied (some LAMB implementations make them optional);
    - the decay uses w before this update and is scaled by r like the Adam part;
    - r = 1 when a norm is zero (a zero-initialised bias at the first step, or no gradient
      and no decay), so the optimizer never divides by zero and never stalls forever;
    - the ratio of the last update is kept in state["trust_ratio"] for inspection.

    Because ||lr * r * u|| = lr * ||w||, every tensor moves by the same fraction `lr` of its
    own norm per step: lr is dimensionless here (a relative step), unlike Adam's lr.

    Defaults follow common LAMB implementations: lr=1e-3, betas=(0.9, 0.999), eps=1e-6,
    weight_decay=0.01. Arguments are validated like torch's (ValueError).

    Source: You et al., ICLR 2020, Algorithm 2 (LAMB).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
        lr = _check_number(lr, "lr", low=0.0)
        betas = _check_betas(betas)
        eps = _check_number(eps, "eps", low=0.0)
        weight_decay = _check_number(weight_decay, "weight_decay", low=0.0)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        """One LAMB update of every parameter that has a gradient; returns closure's loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            b1, b2 = group["betas"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                g = w.grad
                if g.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[w]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(w, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(w, memory_format=torch.preserve_format)
                state["step"] += 1
                t = state["step"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(b1).add_(g, alpha=1.0 - b1)
                v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
                m_hat = m / (1.0 - b1 ** t)
                v_hat = v / (1.0 - b2 ** t)
                u = m_hat / (v_hat.sqrt() + eps)
                if wd != 0.0:
                    u.add_(w, alpha=wd)
                w_norm = torch.linalg.vector_norm(w)
                u_norm = torch.linalg.vector_norm(u)
                ok = (w_norm > 0) & (u_norm > 0)
                r = torch.where(ok, w_norm / torch.where(ok, u_norm, torch.ones_like(u_norm)),
                                torch.ones_like(w_norm))
                state["trust_ratio"] = r
                w.sub_(u * (lr * r))
        return loss
