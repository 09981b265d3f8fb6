"""Training memory: model state, ZeRO sharding, activations, checkpointing, and a measurement
of what autograd really keeps.

Units: bytes everywhere. Where a result is shown in GB we mean 1e9 bytes (not GiB), for the
totals *and* for the cards: an "A100 40GB" counts as 40e9 bytes here. A real card has
2^30-based gigabytes (40 GiB = 42.9e9 bytes), but the CUDA context, the allocator's
fragmentation and the temporary buffers of the backward pass take more than that difference,
so the nominal number in units of 1e9 bytes is a fair usable capacity.

Sources:
- model state and ZeRO: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
  Trillion Parameter Models" (mixed-precision Adam: 2 + 2 + 12 bytes per parameter; stages
  1/2/3 shard optimizer state / + gradients / + weights over the data-parallel ranks);
- activations per transformer layer: Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", section 4 and Table 2;
- checkpoint intervals: Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"
  (segments of about sqrt(L) layers).
Bad arguments (negative sizes, a stage outside 0..3, tp not dividing heads, unknown options)
raise ValueError with the reason.
"""
from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from numbers import Integral, Real

from ._checks import count as _count
from ._checks import size as _size

GB = 1e9
#: Usable capacity of the cards the exercises ask about, in bytes (nominal GB x 1e9).
GPU_MEMORY = {"A100 40GB": 40e9, "A100 80GB": 80e9, "V100 32GB": 32e9}
RECOMPUTE = ("none", "selective", "full")


# ---------------------------------------------------------------- validation


# ---------------------------------------------------------------- model state and ZeRO


def model_state_bytes(n_params, weight_bytes=2, grad_bytes=2, optimizer_bytes=12) -> float:
    """Bytes of one full replica of the training state: n_params * (weight + grad + optimizer).

    The default is mixed-precision Adam (ZeRO paper, K = 12): 16-bit weights and gradients
    (2 + 2 bytes) plus fp32 master weights, first and second moments (4 + 4 + 4 bytes), i.e.
    16 bytes per parameter. Pure fp32 Adam is (4, 4, 8): also 16. bf16 weights/grads with fp32
    moments and no master copy is (2, 2, 8): 12 bytes, so 1e9 parameters take 12e9 bytes.
    """
    n = _size("n_params", n_params)
    w = _size("weight_bytes", weight_bytes, positive=False)
    g = _size("grad_bytes", grad_bytes, positive=False)
    o = _size("optimizer_bytes", optimizer_bytes, positive=False)
    return n * (w + g + o)


def zero_bytes_per_rank(n_params, world_size, stage, weight_bytes=2, grad_bytes=2, optimizer_bytes=12) -> float:
    """Model-state bytes on one data-parallel rank under ZeRO stage 0-3 (Rajbhandari et al. 2020).

    With P parameters, N ranks and (w, g, o) bytes per parameter:
      stage 0 (plain DDP, everything replicated): P (w + g + o)
      stage 1 (optimizer state sharded):          P (w + g) + P o / N
      stage 2 (+ gradients sharded):              P w + P (g + o) / N
      stage 3 (+ weights sharded, FSDP):          P (w + g + o) / N
    Exact division (no rounding to whole parameters); activations and buffers not included.
    Paper, Figure 1 (P = 7.5e9, N = 64, K = 12): 120, 31.4, 16.6 and 1.9 GB.
    """
    n = _size("n_params", n_params)
    N = _count("world_size", world_size, 1)
    if isinstance(stage, bool) or not isinstance(stage, Integral) or stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage!r}")
    w = _size("weight_bytes", weight_bytes, positive=False)
    g = _size("grad_bytes", grad_bytes, positive=False)
    o = _size("optimizer_bytes", optimizer_bytes, positive=False)
    sharded = {0: 0.0, 1: o, 2: g + o, 3: w + g + o}[int(stage)]
    return n * (w + g + o - sharded) + n * sharded / N


def zero_table(n_params, world_size, weight_bytes=2, grad_bytes=2, optimizer_bytes=12) -> dict[int, float]:
    """{stage: bytes per rank} for stages 0..3 (see `zero_bytes_per_rank`)."""
    return {s: zero_bytes_per_rank(n_params, world_size, s, weight_bytes, grad_bytes, optimizer_bytes)
            for s in range(4)}


def min_zero_stage(n_params, world_size, capacity_bytes, activation_bytes=0.0,
                   weight_bytes=2, grad_bytes=2, optimizer_bytes=12):
    """The lowest ZeRO stage whose state per rank plus `activation_bytes` fits in
    `capacity_bytes` (<=), or None when even stage 3 does not fit. Lower stages communicate
    less, so the lowest stage that fits is the one to use."""
    cap = _size("capacity_bytes", capacity_bytes)
    act = _size("activation_bytes", activation_bytes, positive=False)
    for s, b in zero_table(n_params, world_size, weight_bytes, grad_bytes, optimizer_bytes).items():
        if b + act <= cap:
            return s
    return None


# ---------------------------------------------------------------- activations (Korthikanti et al.)


def activation_bytes_per_layer(seq_len, batch, hidden, heads, tp=1, sequence_parallel=False, recompute="none",
                               bytes_per_value=2, dropout=True, mlp_ratio=4) -> float:
    """Bytes one transformer layer keeps for its backward pass (Korthikanti et al. 2022, Table 2).

    s = seq_len, b = batch, h = hidden, a = heads, t = tp. With the paper's assumptions
    (16-bit activations, 1-byte dropout masks, MLP width 4h) a layer stores
      attention  11 s b h + 5 a s^2 b   (QKV input 2, Q and K 4, V 2, projection input 2,
                                         dropout mask 1; softmax output 2, dropout mask 1 and
                                         dropout output 2 per score)
      MLP        19 s b h               (fc1 input 2, GELU input 8, GELU output 8, mask 1)
      2 LayerNorms  4 s b h             (their inputs)
    so that, per `recompute`:
      none:      s b h (34 + 5 a s / h)               tp: s b h (10 + 24/t + 5 a s / (h t))
                 tensor + sequence parallel:          s b h / t (34 + 5 a s / h)
      selective: the 5 a s / h term is dropped (attention core recomputed):
                 s b h (10 + 24/t), or 34 s b h / t with sequence parallelism
                 (FlashAttention gives the same bytes without a separate recompute pass: it never
                 stores the s x s scores, and its backward rebuilds them from Q, K and the row
                 logsumexp, a s b fp32 values, which this model leaves out)
      full:      2 s b h (only the layer input), 2 s b h / t with sequence parallelism.
    Generalised (not in the paper's table, same itemisation): `bytes_per_value` d for the
    non-mask tensors (4 for fp32), `dropout=False` removes the masks and the attention-dropout
    output, `mlp_ratio` m sets the MLP width m h. The 16-bit, dropout, m = 4 defaults give
    the paper's numbers. Without tensor parallelism (t = 1) sequence parallelism changes
    nothing. Embeddings, the final LayerNorm and the logits are not part of a layer.
    """
    s = _count("seq_len", seq_len)
    b = _count("batch", batch)
    h = _count("hidden", hidden)
    a = _count("heads", heads)
    t = _count("tp", tp)
    m = _size("mlp_ratio", mlp_ratio)
    d = _size("bytes_per_value", bytes_per_value)
    if a % t:
        raise ValueError(f"tensor parallelism tp={t} must divide the number of heads {a}")
    if h % a:
        raise ValueError(f"heads={a} must divide hidden={h}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    if not isinstance(sequence_parallel, bool):
        raise ValueError(f"sequence_parallel must be True or False, got {sequence_parallel!r}")
    sbh = s * b * h
    drop = 1.0 if dropout else 0.0
    if recompute == "full":
        return d * sbh / (t if sequence_parallel else 1)
    # per s b h: LayerNorm inputs, QKV input and fc1 input (replicated under plain TP) + 2 masks
    replicated = 4 * d + 2 * drop
    # per s b h: Q, K, V, projection input, GELU input and output (always sharded by TP)
    sharded = (4 + 2 * m) * d
    # per a s^2 b: softmax output (+ dropout mask and dropout output)
    scores = 0.0 if recompute == "selective" else (d + drop * (1 + d)) * a * s * s * b
    if sequence_parallel:
        return ((replicated + sharded) * sbh + scores) / t
    return replicated * sbh + (sharded * sbh + scores) / t


# ---------------------------------------------------------------- checkpoint intervals


def _layer_sizes(layers, per_layer_bytes) -> list[float]:
    if isinstance(per_layer_bytes, Real) and not isinstance(per_layer_bytes, bool):
        L = _count("layers", layers)
        return [_size("per_layer_bytes", per_layer_bytes, positive=False)] * L
    sizes = [_size("per_layer_bytes[i]", x, positive=False) for x in per_layer_bytes]
    if layers is not None and _count("layers", layers) != len(sizes):
        raise ValueError(f"per_layer_bytes has {len(sizes)} entries but layers={layers}")
    if not sizes:
        raise ValueError("per_layer_bytes must name at least one layer")
    return sizes


def checkpoint_layout_bytes(per_layer_bytes, kept) -> float:
    """Peak activation bytes when the layers with (0-based) indices in `kept` keep what they
    save for backward and every other layer is dropped in the forward pass and recomputed in
    the backward pass from the nearest kept layer before it (the model input, always
    available, serves before the first kept layer).

    peak = sum of the kept layers' bytes + the largest run of dropped layers (sum of their
    bytes): one run is rebuilt at a time, and its memory is freed before the next run.
    """
    sizes = _layer_sizes(None, per_layer_bytes)
    keep = set()
    for i in kept:
        i = _count("kept layer index", i, 0)
        if i >= len(sizes):
            raise ValueError(f"kept layer index {i} is out of range for {len(sizes)} layers")
        keep.add(i)
    run, worst = 0.0, 0.0
    for i, x in enumerate(sizes):
        run = 0.0 if i in keep else run + x
        worst = max(worst, run)
    return sum(sizes[i] for i in keep) + worst


def checkpoint_positions(layers, interval) -> list[int]:
    """0-based indices of the kept layers when checkpointing every `interval` layers:
    layers k, 2k, 3k, ... counted from 1 (so interval 1 keeps every layer)."""
    L = _count("layers", layers)
    k = _count("interval", interval)
    if k > L:
        raise ValueError(f"interval={k} exceeds the number of layers {L}")
    return list(range(k - 1, L, k))


def checkpointed_activation_bytes(layers, interval, per_layer_bytes) -> float:
    """Peak activation bytes with a checkpoint every `interval` = k layers.

    Model (the course's): every k-th layer is a checkpoint and keeps what it saved; the k - 1
    layers after it keep nothing and are recomputed from it when the backward pass reaches
    them. Peak = floor(L/k) kept layers + one run of k - 1 recomputed layers:
      uniform layers of A bytes:  M(k) = (floor(L/k) + k - 1) A,
    minimal near k = sqrt(L) (48 layers: k = 7 gives 12 A instead of 48 A). k = 1 is no
    checkpointing (M = L A), k = L keeps one layer and recomputes the rest (also L A).
    `per_layer_bytes` is a number (uniform) or a list of L sizes (non-uniform layers).
    """
    sizes = _layer_sizes(layers, per_layer_bytes)
    return checkpoint_layout_bytes(sizes, checkpoint_positions(len(sizes), interval))


def recompute_overhead(layers, interval, per_layer_flops=None) -> float:
    """Extra forward compute with a checkpoint every k layers, as a fraction of one forward
    pass: the layers that are not kept are run twice. Uniform layers: (L - floor(L/k)) / L,
    = (k - 1)/k when k divides L. `per_layer_flops` (a list) weights the layers by their cost.
    A training step costs about 3 forward passes (backward = 2 forwards), so the step time
    grows by overhead / 3."""
    L = _count("layers", layers)
    flops = _layer_sizes(L, 1.0 if per_layer_flops is None else per_layer_flops)
    kept = set(checkpoint_positions(L, interval))
    total = sum(flops)
    if total == 0:
        raise ValueError("per_layer_flops must not all be zero")
    return sum(f for i, f in enumerate(flops) if i not in kept) / total


def optimal_interval(layers, per_layer_bytes=1.0) -> int:
    """The interval k in 1..L with the smallest `checkpointed_activation_bytes` (the smallest
    such k on a tie: it recomputes less). About sqrt(L) for uniform layers."""
    sizes = _layer_sizes(layers, per_layer_bytes)
    L = len(sizes)
    return min(range(1, L + 1), key=lambda k: (checkpointed_activation_bytes(L, k, sizes), k))


def segment_checkpoint_bytes(layers, interval, per_layer_bytes, input_bytes) -> float:
    """Peak activation bytes with torch-style segment checkpointing: `torch.utils.checkpoint`
    around each segment of k = `interval` consecutive layers (the last may be shorter).

    The forward pass keeps only each segment's input, `input_bytes` = c (for a transformer the
    hidden states, d s b h bytes, much less than a layer's A); the backward pass rebuilds one
    segment at a time. Peak (conservative, like the course's model): every segment input plus
    the largest rebuilt segment,
      uniform layers of A bytes:  M(k) = ceil(L/k) c + k A,
    whose continuous minimum is at k = sqrt(L c / A): sqrt(L) only when a checkpoint costs a
    whole layer (c = A, the course's model of `checkpointed_activation_bytes`), about one layer
    for a transformer (c / A = 2 / 74 for the CH26-08 model: k* = sqrt(24 * 2 / 74) = 0.8).
    No checkpointing at all is L A (not an interval here).
    `per_layer_bytes` is a number (uniform) or a list of L sizes.
    """
    sizes = _layer_sizes(layers, per_layer_bytes)
    L = len(sizes)
    k = _count("interval", interval)
    if k > L:
        raise ValueError(f"interval={k} exceeds the number of layers {L}")
    c = _size("input_bytes", input_bytes, positive=False)
    segments = [sizes[i:i + k] for i in range(0, L, k)]
    return len(segments) * c + max(sum(seg) for seg in segments)


def optimal_segment_interval(layers, per_layer_bytes, input_bytes) -> int:
    """The interval k in 1..L with the smallest `segment_checkpoint_bytes` (the smallest such k
    on a tie). Near sqrt(L c / A) for uniform layers, so 1 when c << A / L."""
    sizes = _layer_sizes(layers, per_layer_bytes)
    L = len(sizes)
    return min(range(1, L + 1), key=lambda k: (segment_checkpoint_bytes(L, k, sizes, input_bytes), k))


def checkpoint_epoch_time(layers, interval, per_layer_bytes=1.0, forward_fraction=1 / 3,
                          doubled_step_time=1.0) -> float:
    """Epoch time with a checkpoint every k layers, relative to no checkpointing, under the
    assumptions of Chapter 26, exercise 26.13(b):
      - recomputation adds its forward FLOPs linearly to the step time: a step takes
        1 + forward_fraction * recompute_overhead(k) (forward = 1/3 of a step by default);
      - if the checkpointed activations of a doubled batch fit where the un-checkpointed
        ones of the original batch did (2 M(k) <= M(1)), the batch is doubled, which halves
        the steps per epoch; a step of the doubled batch takes `doubled_step_time` times as
        long as a step of the original one: 1.0 as the exercise assumes (a GPU that was not
        yet saturated), 2.0 for a saturated GPU (time proportional to the work: the doubled
        batch then gains nothing and checkpointing only costs its recomputation); otherwise
        the batch and the step count stay.
      T(k) = (1 + f r(k)) * (doubled_step_time / 2 if 2 M(k) <= M(1) else 1).
    """
    L = _count("layers", layers)
    sizes = _layer_sizes(L, per_layer_bytes)
    f = _size("forward_fraction", forward_fraction)
    g = _size("doubled_step_time", doubled_step_time)
    step = 1.0 + f * recompute_overhead(L, interval)
    doubled = 2 * checkpointed_activation_bytes(L, interval, sizes) <= checkpointed_activation_bytes(L, 1, sizes)
    return step * (g / 2 if doubled else 1.0)


# ---------------------------------------------------------------- whole-model calculators


def training_memory(n_params, batch, seq_len, hidden, layers, heads, precision="amp",
                    checkpoint_every=None, dropout=True, checkpoint_model="layers") -> dict[str, float]:
    """Memory of training a transformer with AdamW on one GPU, in bytes, by part.

    Assumptions (stated, since the textbook's numbers are loose):
      - state: "fp32" keeps fp32 weights, gradients and two moments (4 + 4 + 8 = 16 B/param);
        "amp" keeps 16-bit weights and gradients plus fp32 master weights and two moments
        (2 + 2 + 12 = 16 B/param, the ZeRO paper's accounting): the same 16 bytes;
      - activations: L layers of `activation_bytes_per_layer` (Korthikanti et al.), 4-byte
        values for "fp32", 2-byte for "amp", 1-byte dropout masks; embeddings, final
        LayerNorm and logits left out (they add 4 s b V for fp32 logits, 1.6 GB for a GPT-2
        vocabulary at b = 16, s = 512);
      - `checkpoint_every` = k with `checkpoint_model="layers"` (default): the course's model of
        `checkpointed_activation_bytes` (floor(L/k) kept layers + k - 1 recomputed ones; None
        or 1 means no checkpointing); with `checkpoint_model="segments"`: torch's
        `checkpoint` around segments of k layers, `segment_checkpoint_bytes` with the segment
        input d s b h bytes (ceil(L/k) inputs + one rebuilt segment of k layers; None means
        no checkpointing, 1 checkpoints every layer).
    Returns {"weights", "gradients", "optimizer", "activations", "total"}.
    """
    n = _size("n_params", n_params)
    if precision == "fp32":
        w, g, o, d = 4, 4, 8, 4
    elif precision == "amp":
        w, g, o, d = 2, 2, 12, 2
    else:
        raise ValueError(f"precision must be 'fp32' or 'amp', got {precision!r}")
    per_layer = activation_bytes_per_layer(seq_len, batch, hidden, heads, bytes_per_value=d, dropout=dropout)
    L = _count("layers", layers)
    k = 1 if checkpoint_every is None else _count("checkpoint_every", checkpoint_every)
    if checkpoint_model == "layers":
        act = checkpointed_activation_bytes(L, k, per_layer)
    elif checkpoint_model == "segments":
        if k > L:
            raise ValueError(f"checkpoint_every={k} exceeds the number of layers {L}")
        act = L * per_layer if checkpoint_every is None else \
            segment_checkpoint_bytes(L, k, per_layer, d * _count("seq_len", seq_len) * _count("batch", batch) * _count("hidden", hidden))
    else:
        raise ValueError(f"checkpoint_model must be 'layers' or 'segments', got {checkpoint_model!r}")
    out = {"weights": n * w, "gradients": n * g, "optimizer": n * o, "activations": act}
    out["total"] = sum(out.values())
    return out


def fits_on(total_bytes, gpus=None) -> dict[str, bool]:
    """{card: total_bytes <= capacity} for the cards of `GPU_MEMORY` (capacities in 1e9 bytes)."""
    total = _size("total_bytes", total_bytes, positive=False)
    cards = GPU_MEMORY if gpus is None else gpus
    return {name: total <= _size(f"capacity of {name}", cap) for name, cap in cards.items()}


# ---------------------------------------------------------------- measurement with torch


@dataclass
class MemoryEstimate:
    """Training memory of one step, in bytes, measured with torch.

    parameter_bytes: the parameters; gradient_bytes: the .grad tensors after one backward;
    optimizer_bytes: torch.optim.AdamW's state after one step (exp_avg, exp_avg_sq, step);
    activation_bytes: storages autograd saved for backward during one forward pass
    (parameters, buffers and the input batch not counted); peak_bytes: on CUDA only, the
    peak allocated memory of forward + backward above what was allocated before it.
    """
    parameter_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    peak_bytes: int | None = None

    @property
    def total(self) -> int:
        return self.parameter_bytes + self.gradient_bytes + self.optimizer_bytes + self.activation_bytes

    def as_dict(self) -> dict[str, int]:
        d = asdict(self)
        d["total_bytes"] = self.total
        return d


def _tensors(obj) -> list:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    return []


def _call(model, batch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (list, tuple)):
        return model(*batch)
    return model(batch)


def _scalar(out):
    """A scalar to call backward on: the sum of every floating output (saves no tensor)."""
    ts = [t for t in _tensors(out) if t.is_floating_point() and t.requires_grad]
    if not ts:
        raise ValueError("the model's output has no floating-point tensor that requires grad")
    return sum(t.sum() for t in ts)


def _storage_key(t):
    s = t.untyped_storage()
    return (t.device.type, t.device.index, s.data_ptr())


def saved_activation_bytes(model, batch, return_output: bool = False):
    """Bytes of the tensors autograd saves for backward during one forward pass of `model`.

    Counted through `torch.autograd.graph.saved_tensors_hooks`: each saved tensor's storage
    once (views share a storage), skipping the storages of parameters, buffers and the
    input batch. Under torch.utils.checkpoint (non-reentrant) the checkpointed region's own
    hooks take over, so only the segment inputs reach ours: exactly what the forward keeps.
    """
    import torch

    skip = {_storage_key(t) for t in [*model.parameters(), *model.buffers(), *_tensors(batch)]}
    seen: dict = {}

    def pack(t):
        key = _storage_key(t)
        if key not in skip:
            seen[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = _call(model, batch)
    total = int(sum(seen.values()))
    return (total, out) if return_output else total


def estimate_memory_consumption(model, batch, checkpointing=False) -> MemoryEstimate:
    """Measure parameter, gradient, AdamW-state and activation memory of one training step.

    Works on a deep copy (the caller's model, gradients and flags are left alone):
    1. parameters: sum of numel * element_size over the (unique) parameters;
    2. activations: `saved_activation_bytes` of one forward pass, with the model's own
       checkpointing switched on or off (`model.checkpointing`); on CUDA also the peak
       allocated memory of forward + backward (torch.cuda.max_memory_allocated), measured after
       one warm-up forward + backward (so cuBLAS's workspace is not counted);
    3. gradients: the .grad tensors after backward of the sum of the outputs;
    4. optimizer: build torch.optim.AdamW on the copy, step once, count the state tensors.
    `checkpointing=True` on a model without a `checkpointing` attribute raises ValueError.
    `batch` is passed as model(batch), model(*batch) for a tuple/list, model(**batch) for a dict.
    """
    import torch

    if not isinstance(checkpointing, bool):
        raise ValueError(f"checkpointing must be True or False, got {checkpointing!r}")
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if checkpointing and not hasattr(model, "checkpointing"):
        raise ValueError(f"{type(model).__name__} does not support activation checkpointing "
                         "(it has no `checkpointing` flag)")
    if not _tensors(batch):
        raise ValueError("batch must contain at least one tensor")
    m = copy.deepcopy(model)
    if hasattr(m, "checkpointing"):
        m.checkpointing = checkpointing
    m.train()
    params = list({id(p): p for p in m.parameters()}.values())
    for p in params:
        p.grad = None
    param_bytes = sum(p.numel() * p.element_size() for p in params)

    cuda = any(p.is_cuda for p in params)
    if cuda:
        # Warm up first: the first matmul on a stream allocates cuBLAS's workspace (tens of MiB)
        # through the caching allocator, which would otherwise count as this model's peak.
        _scalar(_call(m, batch)).backward()
        for p in params:
            p.grad = None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    act, out = saved_activation_bytes(m, batch, return_output=True)
    _scalar(out).backward()
    del out
    peak = None
    if cuda:
        torch.cuda.synchronize()
        peak = int(torch.cuda.max_memory_allocated() - before)
    grad_bytes = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)

    opt = torch.optim.AdamW([p for p in params if p.requires_grad])
    for p in params:
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)
    opt.step()
    state = [t for st in opt.state.values() for t in st.values() if isinstance(t, torch.Tensor)]
    opt_bytes = sum(t.numel() * t.element_size() for t in state)
    return MemoryEstimate(int(param_bytes), int(grad_bytes), int(opt_bytes), int(act), peak)


# ---------------------------------------------------------------- benchmark: prediction vs measurement

DEFAULT_BENCH_CONFIGS = (
    {"batch": 2, "seq_len": 32, "hidden": 64, "heads": 4, "layers": 2},
    {"batch": 4, "seq_len": 64, "hidden": 64, "heads": 8, "layers": 3},
    {"batch": 1, "seq_len": 128, "hidden": 96, "heads": 4, "layers": 2},
    {"batch": 8, "seq_len": 16, "hidden": 128, "heads": 2, "layers": 4},
    {"batch": 2, "seq_len": 48, "hidden": 64, "heads": 4, "layers": 4, "checkpoint_every": 2, "checkpointing": True},
)


def predicted_transformer_activation_bytes(batch, seq_len, hidden, heads, layers, mlp_ratio=4,
                                           checkpointing=False, checkpoint_every=1) -> float:
    """Korthikanti's itemisation applied to `CheckpointedTransformer` in fp32 (no dropout):
    L * activation_bytes_per_layer(..., bytes_per_value=4, dropout=False) = L (64 s b h + 4 a s^2 b)
    for m = 4, plus the final LayerNorm input and the head input (8 s b h). With torch
    checkpointing every k blocks the forward keeps ceil(L/k) segment inputs (4 s b h each).
    It ignores the LayerNorm statistics (mean and rstd, 16 s b bytes per layer): the
    measured bytes are larger by exactly that, a relative error of about 1/(4h)."""
    L = _count("layers", layers)
    k = _count("checkpoint_every", checkpoint_every)
    sbh = _count("seq_len", seq_len) * _count("batch", batch) * _count("hidden", hidden)
    if checkpointing:
        blocks = math.ceil(L / k) * 4 * sbh
    else:
        blocks = L * activation_bytes_per_layer(seq_len, batch, hidden, heads, bytes_per_value=4,
                                                dropout=False, mlp_ratio=mlp_ratio)
    return blocks + 8 * sbh


def activation_benchmark(configs=DEFAULT_BENCH_CONFIGS, device=None, seed: int = 0) -> list[dict]:
    """Predicted vs measured activation bytes of `CheckpointedTransformer` configurations.

    Each config is a dict with batch, seq_len, hidden, heads, layers and optionally
    mlp_ratio, checkpoint_every, checkpointing. Returns one dict per config:
    {"config", "predicted_bytes" (`predicted_transformer_activation_bytes`),
     "measured_bytes" (`saved_activation_bytes`), "rel_error" ((pred - meas) / meas),
     "device", and on CUDA "cuda_forward_bytes": memory_allocated after the forward minus
     before it, less the logits: what the forward really left on the card}.
    """
    import torch

    from solutions_lib.models import CheckpointedTransformer

    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = []
    for cfg in configs:
        cfg = dict(cfg)
        B, S = cfg["batch"], cfg["seq_len"]
        m = cfg.get("mlp_ratio", 4)
        k = cfg.get("checkpoint_every", 1)
        ckpt = bool(cfg.get("checkpointing", False))
        model = CheckpointedTransformer(vocab=64, hidden=cfg["hidden"], heads=cfg["heads"], layers=cfg["layers"],
                                        max_seq=S, mlp_ratio=m, checkpoint_every=k, seed=seed).to(dev)
        model.checkpointing = ckpt
        idx = model.example_batch(B, S, seed=seed).to(dev)
        row = {"config": cfg, "device": dev.type}
        if dev.type == "cuda":
            _scalar(model(idx)).backward()  # warm up (cuBLAS workspace, allocator pools)
            model.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
        measured, out = saved_activation_bytes(model, idx, return_output=True)
        if dev.type == "cuda":
            torch.cuda.synchronize()
            row["cuda_forward_bytes"] = int(torch.cuda.memory_allocated() - before
                                            - out.untyped_storage().nbytes())
        del out
        pred = predicted_transformer_activation_bytes(B, S, cfg["hidden"], cfg["heads"], cfg["layers"], m, ckpt, k)
        row.update(predicted_bytes=float(pred), measured_bytes=int(measured), rel_error=(pred - measured) / measured)
        rows.append(row)
    return rows
