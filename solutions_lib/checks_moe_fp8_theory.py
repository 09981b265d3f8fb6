"""Test machinery of 12 theory (experts, FP8 and kernels by the numbers): oracles that need no
reference answer. A kit module, not withheld; named `checks_` because its cells only call the
student's functions and compare, so they run grader-side (docs/GRADING.md rule 10).

- `dtype_facts(dtype)`: max normal, min normal, min subnormal and eps (the spacing above 1) of a
  torch floating dtype, measured from its bit patterns (the 256 codes of a float8 dtype; for the
  16- and 32-bit formats torch.finfo and torch.nextafter). The float8 eps comes from the codes,
  not from torch.finfo: torch 2.13 reports finfo(float8_e5m2fnuz).eps = 0.125, while the
  spacing of its codes above 1 is 0.25.
- `TORCH_FORMATS`: (dtype, exp_bits, man_bits, kind) of the seven formats torch can check.
- `MX_PUBLISHED`: the OCP MX v1.0 element formats (FP6 E2M3, FP6 E3M2, FP4 E2M1): max normal,
  min normal, min subnormal as the specification's tables give them.
- `brute_drops(load, capacity)`: dropped assignments counted one by one.
- `module_param_counts(...)`: (total, active) of an MoE decoder from the list of its weight shapes,
  one by one (active: the same model with top_k + n_shared experts per layer).
- `decoded_limits(exp_bits, man_bits, kind)`: the limits of a small format found by decoding
  every one of its codes (sign bit left out) under the format's rules for specials.
- `expect_dict(got, keys, what)`: fail with a readable message unless `got` is a dict with `keys`.
"""
from __future__ import annotations

import math

import torch

__all__ = ["dtype_facts", "TORCH_FORMATS", "MX_PUBLISHED", "brute_drops", "module_param_counts", "decoded_limits",
           "expect_dict", "MIXTRAL_8X7B", "OLMOE_1B_7B"]

TORCH_FORMATS = [(torch.float32, 8, 23, "ieee"), (torch.float16, 5, 10, "ieee"), (torch.bfloat16, 8, 7, "ieee"),
                 (torch.float8_e4m3fn, 4, 3, "fn"), (torch.float8_e5m2, 5, 2, "ieee"),
                 (torch.float8_e4m3fnuz, 4, 3, "fnuz"), (torch.float8_e5m2fnuz, 5, 2, "fnuz")]

# OCP Microscaling Formats (MX) Specification v1.0 (2023), the FP6 and FP4 element-format tables
MX_PUBLISHED = {(2, 3): dict(max_normal=7.5, min_normal=1.0, min_subnormal=0.125),
                (3, 2): dict(max_normal=28.0, min_normal=0.25, min_subnormal=0.0625),
                (2, 1): dict(max_normal=6.0, min_normal=1.0, min_subnormal=0.5)}


def dtype_facts(dtype) -> dict:
    """{'max_normal', 'min_normal', 'min_subnormal', 'eps'} of a torch float dtype, from its codes."""
    if torch.finfo(dtype).bits == 8:
        vals = torch.arange(256, dtype=torch.uint8).view(dtype).double()
        vals = torch.unique(vals[torch.isfinite(vals)])
        pos = vals[vals > 0]
        above_one = pos[pos > 1]
        return {"max_normal": float(vals.max()), "min_normal": float(torch.finfo(dtype).smallest_normal),
                "min_subnormal": float(pos.min()), "eps": float(above_one.min()) - 1.0}
    zero, one = torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype)
    fi = torch.finfo(dtype)
    return {"max_normal": float(fi.max), "min_normal": float(fi.smallest_normal),
            "min_subnormal": float(torch.nextafter(zero, one)), "eps": float(torch.nextafter(one, 2 * one)) - 1.0}


def brute_drops(load, capacity) -> int:
    """Assignments beyond `capacity` at each expert, counted one at a time."""
    dropped = 0
    for n in load:
        for slot in range(int(n)):
            dropped += slot >= capacity
    return int(dropped)


def _weight_shapes(d, f, L, n_experts, V, a, akv, dh, experts_kept):
    """The shapes of every weight of the decoder, layer by layer (experts_kept experts per layer)."""
    shapes = [(d,), (V, d), (V, d)]                                    # final norm, embedding, output head
    for _ in range(L):
        shapes += [(a * dh, d), (akv * dh, d), (akv * dh, d), (d, a * dh), (n_experts, d), (d,), (d,)]
        for _ in range(experts_kept):
            shapes += [(f, d), (f, d), (d, f)]                          # gate, up, down
    return shapes


def module_param_counts(d_model, d_ff, n_layers, n_experts, top_k, vocab_size, n_heads, n_kv_heads, head_dim,
                        n_shared=0) -> tuple[int, int]:
    """(total, active): the numel of every weight of the decoder, listed shape by shape."""
    args = (d_model, d_ff, n_layers, n_experts, vocab_size, n_heads, n_kv_heads, head_dim)
    count = lambda kept: sum(math.prod(s) for s in _weight_shapes(*args, kept))
    return int(count(n_experts + n_shared)), int(count(top_k + n_shared))


def decoded_limits(exp_bits, man_bits, kind) -> dict:
    """{'max_normal', 'min_normal', 'min_subnormal', 'eps'} by decoding every code of the format.

    'ieee': the top exponent field codes inf/NaN; 'fn': only the all-ones code of the top exponent
    is NaN; 'fnuz': bias 2^(e-1), every field a number (the NaN is the negative zero); 'mx': no specials."""
    e, m = int(exp_bits), int(man_bits)
    bias = 2 ** (e - 1) if kind == "fnuz" else 2 ** (e - 1) - 1
    values = []
    for E in range(2 ** e):
        for M in range(2 ** m):
            if kind == "ieee" and E == 2 ** e - 1:
                continue
            if kind == "fn" and E == 2 ** e - 1 and M == 2 ** m - 1:
                continue
            values.append((E > 0, 2.0 ** (E - bias) * (1 + M / 2 ** m) if E else 2.0 ** (1 - bias) * M / 2 ** m))
    pos = sorted(v for _, v in values if v > 0)
    return {"max_normal": pos[-1], "min_normal": min(v for normal, v in values if normal),
            "min_subnormal": pos[0], "eps": min(v for v in pos if v > 1) - 1.0}


def expect_dict(got, keys, what: str) -> dict:
    """`got` itself when it is a dict holding every key of `keys` (extra keys are fine)."""
    from solutions_lib.grading import expect_true
    expect_true(isinstance(got, dict), f"{what}: expected a dict, got {type(got).__name__}")
    missing = [k for k in keys if k not in got]
    expect_true(not missing, f"{what}: the dict lacks the key(s) {missing}; it must hold {list(keys)} "
                             "(extra keys are fine)")
    return got


#: the published configurations the tests use (the notebook prints the same ones)
MIXTRAL_8X7B = dict(d_model=4096, d_ff=14336, n_layers=32, n_experts=8, top_k=2, vocab_size=32000, n_heads=32,
                    n_kv_heads=8, head_dim=128)
OLMOE_1B_7B = dict(d_model=2048, d_ff=1024, n_layers=16, n_experts=64, top_k=8, vocab_size=50304, n_heads=16,
                   n_kv_heads=16, head_dim=128)
