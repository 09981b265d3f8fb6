"""Mixture of experts in one process: the references of assignment 12, exercises 1 (EXT-MOE).

Notation: T tokens of width h (x of shape (T, h)), E experts, top-k routing, router logits
z = x W_r of shape (T, E), router probabilities p = softmax(z) over the experts.

* `top_k_route(logits, k)`: the k experts of largest p per token and their gates, the chosen
  probabilities renormalised to sum to 1 per token (GShard, Lepikhin et al. 2020; Mixtral).
  Gates keep their gradient: the router learns through them.
* `expert_capacity(T, E, k, c)`: ceil(c * T * k / E) token slots per expert (Switch
  Transformer, Fedus et al. 2021, with k choices per token); `capacity_keep(experts, E, C)`:
  which assignments fit, in GShard's priority order: every token's first choice (tokens in
  order), then every second choice, ...; an expert keeps its first C assignments in that order,
  the rest are dropped (they contribute 0; the residual connection carries the token on).
* `balancing_loss(logits, experts)`: Switch's auxiliary loss E * sum_i f_i P_i with f_i the
  fraction of the T*k assignments routed to expert i (no gradient) and P_i the mean router
  probability of expert i (dimensionless; 1.0 for perfectly uniform routing).
* `router_z_loss(logits)`: ST-MoE's (Zoph et al. 2022) mean over tokens of logsumexp(z)^2,
  which keeps the logits small (float32/bf16 round-off in the softmax).
* `biased_route` and `update_bias`: auxiliary-loss-free balancing (DeepSeek-V3, 2024): a
  per-expert bias b is added to the affinities for the *choice* of experts only, the gates
  come from the unbiased affinities; after each step b_i += rate * sign(mean load - load_i).
  (DeepSeek-V3 uses sigmoid affinities; here the softmax probabilities, as elsewhere.)
* `moe_layer(x, router_weight, experts, top_k, capacity_factor=None)`: y_t = sum over the
  kept choices j of gate_tj * expert_{e_tj}(x_t); each expert runs only on its own tokens.
* `load_report(experts, n_experts, n_ranks, seconds_per_row)`: tokens per expert and per
  expert-parallel rank (experts in contiguous blocks), max/mean imbalance, and the step time
  it implies: the most loaded rank sets it.

Every function raises ValueError with the reason on bad input.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import torch

__all__ = ["top_k_route", "expert_capacity", "capacity_keep", "balancing_loss", "router_z_loss",
           "biased_route", "update_bias", "moe_layer", "load_report", "expert_mlps"]


def _int(name, v, lo=None):
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise ValueError(f"{name} must be an int, got {v!r}")
    if lo is not None and v < lo:
        raise ValueError(f"{name} must be >= {lo}, got {v}")
    return int(v)


def _logits(logits):
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or not logits.is_floating_point():
        raise ValueError("logits must be a floating-point tensor of shape (tokens, experts), got "
                         f"{getattr(logits, 'shape', type(logits).__name__)}")
    if logits.shape[1] < 1:
        raise ValueError("logits need at least one expert column")
    return logits


def _experts_idx(experts, n_experts):
    if not isinstance(experts, torch.Tensor) or experts.dim() != 2 or experts.is_floating_point() \
            or experts.dtype == torch.bool:
        raise ValueError("experts must be an integer tensor of shape (tokens, k)")
    n_experts = _int("n_experts", n_experts, 1)
    if experts.numel() and (int(experts.min()) < 0 or int(experts.max()) >= n_experts):
        raise ValueError(f"expert indices must lie in [0, {n_experts})")
    return n_experts


def top_k_route(logits: torch.Tensor, k: int):
    """(gates, experts), both (T, k): the k largest router probabilities p = softmax(logits) of
    each token, largest first, renormalised to sum to 1 over the k (gates keep their gradient);
    experts the indices (int64). ValueError: logits not (T, E) float, k not an int in [1, E]."""
    _logits(logits)
    k = _int("k", k, 1)
    if k > logits.shape[1]:
        raise ValueError(f"k = {k} exceeds the number of experts {logits.shape[1]}")
    probs = torch.softmax(logits, dim=-1)
    top, idx = probs.topk(k, dim=-1)
    return top / top.sum(dim=-1, keepdim=True), idx


def expert_capacity(tokens: int, n_experts: int, top_k: int, capacity_factor: float) -> int:
    """Token slots per expert, ceil(capacity_factor * tokens * top_k / n_experts) (an int).

    capacity_factor 1.0 is exactly the uniform load; Switch trains with 1.0-1.25 (Fedus et al.
    2021, table 1). ValueError: non-positive or non-int counts, capacity_factor not > 0."""
    tokens, n_experts, top_k = _int("tokens", tokens, 1), _int("n_experts", n_experts, 1), _int("top_k", top_k, 1)
    if isinstance(capacity_factor, bool) or not isinstance(capacity_factor, Real) \
            or not math.isfinite(capacity_factor) or capacity_factor <= 0:
        raise ValueError(f"capacity_factor must be a finite number > 0, got {capacity_factor!r}")
    x = capacity_factor * tokens * top_k / n_experts
    return int(math.ceil(x - 1e-9 * max(1.0, x)))


def capacity_keep(experts: torch.Tensor, n_experts: int, capacity: int) -> torch.Tensor:
    """Bool (T, k): which assignments an expert of `capacity` slots keeps.

    Priority (GShard): all first choices in token order, then all second choices, ...; each
    expert keeps its first `capacity` assignments in that order. ValueError: bad shapes, indices
    out of range, capacity not an int >= 0."""
    n_experts = _experts_idx(experts, n_experts)
    capacity = _int("capacity", capacity, 0)
    order = experts.t().reshape(-1)                        # slot-major: choice 0 of every token first
    onehot = torch.nn.functional.one_hot(order.long(), n_experts)
    position = (onehot.cumsum(0) * onehot).sum(1) - 1       # rank of each assignment at its expert
    return (position < capacity).reshape(experts.shape[1], experts.shape[0]).t().contiguous()


def _load(experts, n_experts):
    return torch.bincount(experts.reshape(-1).long(), minlength=n_experts)


def balancing_loss(logits: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """Switch Transformer's load-balancing loss E * sum_i f_i P_i (a 0-d tensor, 1.0 when uniform).

    f_i = (assignments to expert i) / (T k), counted from `experts` (T, k), no gradient;
    P_i = mean over tokens of softmax(logits)[:, i], which carries the gradient to the router.
    Fedus et al. 2021, eq. 4 (k = 1); GShard's mean-gate version with k = 2."""
    _logits(logits)
    n = _experts_idx(experts, logits.shape[1])
    if experts.shape[0] != logits.shape[0] or experts.shape[0] == 0:
        raise ValueError("experts and logits must have the same, non-zero number of tokens")
    f = _load(experts, n).to(logits.dtype) / experts.numel()
    p = torch.softmax(logits, dim=-1).mean(0)
    return n * (f * p).sum()


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """ST-MoE's router z-loss (Zoph et al. 2022, eq. 5): mean over tokens of logsumexp(z_t)^2 (0-d)."""
    _logits(logits)
    if logits.shape[0] == 0:
        raise ValueError("logits need at least one token")
    return torch.logsumexp(logits, dim=-1).pow(2).mean()


def biased_route(logits: torch.Tensor, bias: torch.Tensor, k: int):
    """(gates, experts) as `top_k_route`, but the experts are the top k of softmax(logits) + bias;
    the gates are the chosen *unbiased* probabilities, renormalised (DeepSeek-V3, sec. 2.1.2)."""
    _logits(logits)
    k = _int("k", k, 1)
    if not isinstance(bias, torch.Tensor) or bias.shape != (logits.shape[1],):
        raise ValueError(f"bias must be a tensor of shape ({logits.shape[1]},)")
    if k > logits.shape[1]:
        raise ValueError(f"k = {k} exceeds the number of experts {logits.shape[1]}")
    probs = torch.softmax(logits, dim=-1)
    idx = (probs + bias.detach().to(probs.dtype)).topk(k, dim=-1).indices
    top = probs.gather(1, idx)
    return top / top.sum(dim=-1, keepdim=True), idx


def update_bias(bias: torch.Tensor, experts: torch.Tensor, n_experts: int, rate: float) -> torch.Tensor:
    """The next bias: b_i + rate * sign(mean load - load_i), load_i the assignments to expert i in
    `experts` (T, k), mean load T k / E. Underloaded experts gain, overloaded lose, exact mean
    unchanged (DeepSeek-V3's bias update speed gamma = rate). A new tensor; `bias` is not modified."""
    n = _experts_idx(experts, n_experts)
    if not isinstance(bias, torch.Tensor) or bias.shape != (n,):
        raise ValueError(f"bias must be a tensor of shape ({n},)")
    if isinstance(rate, bool) or not isinstance(rate, Real) or not math.isfinite(rate) or rate < 0:
        raise ValueError(f"rate must be a finite number >= 0, got {rate!r}")
    load = _load(experts, n).to(torch.float64)
    mean = experts.numel() / n
    return bias + rate * torch.sign(mean - load).to(bias.dtype)


def moe_layer(x: torch.Tensor, router_weight: torch.Tensor, experts, top_k: int, capacity_factor=None):
    """The MoE layer's output (T, h): y_t = sum over token t's kept choices j of g_tj * E_{e_tj}(x_t).

    Router logits x @ router_weight (h, E); `top_k_route`; with a capacity_factor, the
    assignments beyond `expert_capacity` are dropped (`capacity_keep`) and contribute 0 (gates
    are not renormalised after a drop). Each expert is called once, on exactly its kept tokens
    in token order (an expert with none is not called)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError("x must be a tensor of shape (tokens, hidden)")
    if not isinstance(router_weight, torch.Tensor) or router_weight.dim() != 2 or router_weight.shape[0] != x.shape[1]:
        raise ValueError(f"router_weight must have shape ({x.shape[1]}, n_experts)")
    n = router_weight.shape[1]
    if len(experts) != n:
        raise ValueError(f"{len(experts)} experts for a router over {n}")
    gates, idx = top_k_route(x @ router_weight, top_k)
    if capacity_factor is None:
        keep = torch.ones_like(idx, dtype=torch.bool)
    else:
        keep = capacity_keep(idx, n, expert_capacity(x.shape[0], n, top_k, capacity_factor))
    y = torch.zeros_like(x)
    for e in range(n):
        tok, slot = torch.nonzero((idx == e) & keep, as_tuple=True)
        if tok.numel():
            y = y.index_add(0, tok, gates[tok, slot].unsqueeze(1) * experts[e](x[tok]))
    return y


def load_report(experts: torch.Tensor, n_experts: int, n_ranks: int, seconds_per_row: float) -> dict:
    """Load of an expert-parallel step from the routing `experts` (T, k).

    Experts live in contiguous blocks: rank r holds experts [r E/n, (r+1) E/n). Returns
    tokens_per_expert (list of E ints), expert_imbalance = max/mean of it, tokens_per_rank
    (list of n ints), rank_imbalance = max/mean of it, step_time = max(tokens_per_rank) *
    seconds_per_row (every rank waits for the most loaded one at the combine all-to-all) and
    balanced_step_time = mean(tokens_per_rank) * seconds_per_row (seconds)."""
    n = _experts_idx(experts, n_experts)
    ranks = _int("n_ranks", n_ranks, 1)
    if n % ranks:
        raise ValueError(f"n_ranks = {ranks} must divide n_experts = {n}")
    if experts.numel() == 0:
        raise ValueError("experts holds no assignment")
    if isinstance(seconds_per_row, bool) or not isinstance(seconds_per_row, Real) or not seconds_per_row > 0 \
            or not math.isfinite(seconds_per_row):
        raise ValueError(f"seconds_per_row must be a finite number > 0, got {seconds_per_row!r}")
    per_expert = _load(experts, n).tolist()
    per_rank = [sum(per_expert[r * (n // ranks):(r + 1) * (n // ranks)]) for r in range(ranks)]
    mean_e, mean_r = sum(per_expert) / n, sum(per_rank) / ranks
    return {"tokens_per_expert": per_expert, "expert_imbalance": max(per_expert) / mean_e,
            "tokens_per_rank": per_rank, "rank_imbalance": max(per_rank) / mean_r,
            "step_time": max(per_rank) * float(seconds_per_row),
            "balanced_step_time": mean_r * float(seconds_per_row)}


def expert_mlps(n_experts: int, hidden: int, ffn: int, seed: int = 0, dtype=torch.float64):
    """E small MLP experts Linear(h, ffn) -> GELU -> Linear(ffn, h), seeded (a torch.nn.ModuleList)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(hidden, ffn), torch.nn.GELU(), torch.nn.Linear(ffn, hidden)).to(dtype)
            for _ in range(_int("n_experts", n_experts, 1)))
