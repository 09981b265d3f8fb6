"""Test machinery of 12 theory (experts, FP8 and kernels by the numbers): oracles that need no
reference answer. A kit module, not withheld.

- `dtype_facts(dtype)`: max normal, min normal, min subnormal and eps (the spacing above 1) of a
  torch floating dtype, measured from its bit patterns (the 256 codes of a float8 dtype; for the
  16- and 32-bit formats torch.finfo and torch.nextafter). The float8 eps comes from the codes,
  not from torch.finfo: torch 2.13 reports finfo(float8_e5m2fnuz).eps = 0.125, while the
  spacing of its codes above 1 is 0.25.
- `TORCH_FORMATS`: (dtype, exp_bits, man_bits, kind) of the seven formats torch can check.
- `MX_PUBLISHED`: the OCP MX v1.0 element formats (FP6 E2M3, FP6 E3M2, FP4 E2M1): max normal,
  min normal, min subnormal as the specification's tables give them.
- `brute_drops(load, capacity)`: dropped assignments counted one by one.
"""
from __future__ import annotations

import torch

__all__ = ["dtype_facts", "TORCH_FORMATS", "MX_PUBLISHED", "brute_drops"]

TORCH_FORMATS = [(torch.float32, 8, 23, "ieee"), (torch.float16, 5, 10, "ieee"), (torch.bfloat16, 8, 7, "ieee"),
                 (torch.float8_e4m3fn, 4, 3, "fn"), (torch.float8_e5m2, 5, 2, "ieee"),
                 (torch.float8_e4m3fnuz, 4, 3, "fnuz"), (torch.float8_e5m2fnuz, 5, 2, "fnuz")]

# OCP Microscaling Formats (MX) Specification v1.0 (2023), section 5.3, tables 2 and 3
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
