"""Grader-side helpers of 12 exercises_2 (FP8): what a test cell that only calls the student's code
and compares needs, named so the cell stays grader-side (docs/GRADING.md rule 10).

`saturated(x, dtype)` is the saturating FP8 cast (clamp to the format's largest normal value,
then torch's cast), the course's stand-in for the student's `fp8_cast` when a later answer is
graded alone (`upstream.swapped(globals(), fp8_cast=saturated)`). It is the kit's function in
`probes_fp8`, re-exported here, so it travels to the kernel by module and name.
"""
from __future__ import annotations

from .probes_fp8 import saturated

__all__ = ["saturated"]
