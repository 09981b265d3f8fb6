"""Training LLMs at scale: reference implementations, exact calculators and a lab kit.

Modules (SI units throughout: bytes, seconds, FLOPs, FLOP/s):

- `solutions_lib.optim`: AdamW step, global-norm clipping, LAMB.
- `solutions_lib.grading`: comparison helpers and anti-delegation guards used by the tests.
- `solutions_lib.course`: the nbgrader course tooling (coverage, self-check, demo).

Run `python -m solutions_lib --help` for the command-line tools.
"""
__version__ = "0.1.0"

try:   # inside a notebook's kernel: a test run before its answer cell says what to do (kernel_hints.py)
    from .kernel_hints import install as _install_kernel_hints

    _install_kernel_hints()
    del _install_kernel_hints
except Exception:  # noqa: BLE001 - never let a hint break the import
    pass
