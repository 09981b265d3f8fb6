"""What the 12 Triton test cells measure about a kernel, from inside Triton's interpreter and
outside the student's own code (issue 24: a full mark means the student built it).

`watch()` is a context manager; while it is open, every kernel that Triton's interpreter
(TRITON_INTERPRET=1) launches is observed at the two places where a kernel touches memory: the
interpreter's masked load and masked store, through which every `tl.load`/`tl.store` passes (plain
pointers, block pointers and tensor descriptors alike). For each launch it records the kernel,
the grid (programs launched) and the tensors passed in (their address ranges); for each load and
store, the tile (how many elements the pointer block holds, masked lanes included: what a GPU
keeps in registers), the lanes that were active (mask true) and where they point. From that:

- `max_load_tile`, `max_store_tile`: the largest block a single tl.load / tl.store moved. A kernel
  that ignores its BLOCK arguments and loads a whole row, a whole K or every key at once shows
  here, whatever it reports.
- `loaded`, `stored`: active elements read and written, over all launches (a second pass over the
  input, or a softmax written to scratch memory, shows here), and per tensor `loaded_from(t)`.
- `out_of_bounds`: active lanes that point outside the tensor the access addresses (the one most
  of its lanes point into; a missing mask at a ragged edge), or outside every tensor passed. Those lanes are NOT performed (a load gets 0, a store is dropped), so a
  missing mask is reported, never a crash or silently corrupted memory; `oob_examples` says where.
- `launches`, `programs`: kernel launches and the programs of each grid.
- `returned_from_kernel(t)`: whether `t` holds exactly what a kernel stored (a tensor passed to a
  kernel, read back after the launch that last wrote it), so work done in torch after the kernel
  does not count as the kernel's.

`install_guard()` (run on import when the interpreter is on, and by `watch()`) makes the bounds
check permanent: outside a `watch()` block too, a stray lane is not performed, so a kernel with a
missing mask can not corrupt the notebook kernel's memory (a crash there would cost every later
cell). The probe only measures; the test cell decides (expect_equal / expect_between on the numbers).
`interpreter_compat()` (run on import) lets triton 3.6's interpreter run loops whose bound is a
kernel argument under numpy >= 2.4 (it converted a 1-element array with int(), an error there;
triton >= 3.7 squeezes it first). Checked with triton 3.6 and 3.9.
`require_interpreter()` raises an AssertionError that says how to install triton or how to turn on
the interpreter, so a test cell never fails with a bare ImportError.
"""
from __future__ import annotations

import contextlib

import numpy as np

try:
    import triton  # noqa: F401
    _HAVE_TRITON = True
except ImportError:  # pragma: no cover - require_interpreter() says how to install it
    _HAVE_TRITON = False

__all__ = ["KernelProbe", "watch", "install_guard", "require_interpreter", "interpreting", "interpreter_compat", "cdiv",
           "pow2", "attention_key_bound", "dense_attention", "run_watched", "expect_kernel", "BANNED"]

INSTALL_HINT = ("triton is not installed in this kernel's Python: run `pip install triton` (or "
                "`pip install -e '.[dev]'` in the course folder), restart the kernel and run the notebook from the top. "
                "On a machine without a GPU its interpreter runs the kernels on CPU tensors.")
INTERPRET_HINT = ("these tests measure your kernels inside Triton's interpreter, which only runs when "
                  "TRITON_INTERPRET=1 is set before triton is first imported: run the notebook's first cell first "
                  "(on a GPU machine, set os.environ['TRITON_INTERPRET'] = '1' there), restart the kernel and run "
                  "from the top.")


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def pow2(n: int) -> int:
    """The smallest power of two >= max(n, 16) (a padded head dimension)."""
    return max(16, 1 << (int(n) - 1).bit_length())


def attention_key_bound(s_q: int, s_k: int, block_m: int, block_n: int, causal: bool) -> int:
    """Key rows one (batch, head) of a tiled attention forward needs to load: per query block of
    block_m rows, every key (non-causal), or (causal) the key blocks of block_n up to the one
    holding the block's last row, the blocks wholly above the diagonal skipped."""
    total = 0
    for i in range(cdiv(s_q, block_m)):
        if causal:
            last = min(s_q, (i + 1) * block_m)          # keys 0 .. last-1 are visible to the block
            total += min(s_k, cdiv(min(last, s_k), block_n) * block_n)
        else:
            total += s_k
    return total


def interpreter_compat() -> None:
    """Make `range(0, n, BLOCK)` with a kernel-argument bound work in triton's interpreter under
    numpy >= 2.4 (triton 3.6 calls int() on a 1-element array there). Idempotent; no-op without
    triton."""
    if not _HAVE_TRITON:
        return
    from triton.runtime import interpreter as interp
    orig = interp._patch_lang_tensor
    if getattr(orig, "_tas_compat", False):
        return

    def patched(tensor, scope):
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    patched._tas_compat = True
    interp._patch_lang_tensor = patched


interpreter_compat()


def interpreting() -> bool:
    """True when `triton.jit` makes interpreted kernels (TRITON_INTERPRET=1 was set before import)."""
    if not _HAVE_TRITON:
        return False
    import triton as _t
    from triton.runtime.interpreter import InterpretedFunction

    def _probe_fn(x):  # never launched
        return x
    return isinstance(_t.jit(_probe_fn), InterpretedFunction)


def _install_on_import() -> None:
    try:
        install_guard()
    except Exception:  # noqa: BLE001  (a triton whose interpreter differs: watch() will say so)
        pass


def require_interpreter() -> None:
    """Raise an AssertionError saying what to do when triton is missing or not interpreting."""
    if not _HAVE_TRITON:
        raise AssertionError(INSTALL_HINT)
    if not interpreting():
        raise AssertionError(INTERPRET_HINT)


def _extent(t) -> tuple[int, int]:
    """[lo, hi) byte addresses a strided tensor can touch."""
    item = t.element_size()
    lo = hi = t.data_ptr()
    for size, stride in zip(t.shape, t.stride()):
        if size == 0:
            return lo, lo
        span = (size - 1) * stride * item
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + item


class KernelProbe:
    """Measurements of the kernels launched while `watch()` was open (see the module docstring)."""

    def __init__(self):
        self.launches = 0
        self.programs: list[int] = []
        self.kernels: list[str] = []
        self.kernel_files: list[str] = []   # where each launched kernel (and each @triton.jit it called) was written
        self.max_load_tile = 0
        self.max_store_tile = 0
        self.loaded = 0
        self.stored = 0
        self.loads = 0
        self.stores = 0
        self.out_of_bounds = 0
        self.oob_examples: list[str] = []
        self._by_range: dict[tuple[int, int], list[int]] = {}   # (lo, hi) -> [loaded, stored]
        self._stored_names: set[str] = set()
        self._snapshots: dict[int, object] = {}                 # data_ptr -> tensor after its last store

    # ---- what the tests read
    def loaded_from(self, t) -> int:
        lo, hi = _extent(t)
        return sum(v[0] for (a, b), v in self._by_range.items() if a < hi and lo < b)

    def stored_to(self, t) -> int:
        lo, hi = _extent(t)
        return sum(v[1] for (a, b), v in self._by_range.items() if a < hi and lo < b)

    @property
    def total_programs(self) -> int:
        return sum(self.programs)

    def returned_from_kernel(self, t) -> bool:
        """True when tensor `t` equals, element for element, a tensor some kernel stored into
        (read after that launch), in t's dtype."""
        import torch
        if not isinstance(t, torch.Tensor):
            return False
        flat = t.detach().reshape(-1).cpu()
        for snap in self._snapshots.values():
            if snap.numel() == flat.numel():
                s = snap.reshape(-1).to(flat.dtype)
                if torch.equal(torch.nan_to_num(s), torch.nan_to_num(flat)) and \
                        torch.equal(s.isnan(), flat.isnan()):
                    return True
        return False

    def summary(self) -> dict:
        return {"launches": self.launches, "programs": list(self.programs), "max_load_tile": self.max_load_tile,
                "max_store_tile": self.max_store_tile, "loaded": self.loaded, "stored": self.stored,
                "out_of_bounds": self.out_of_bounds}

    # ---- recording (called from the guard, for every probe that is open)
    def _record(self, acc: "_Access") -> None:
        if acc.key is not None:
            self._by_range.setdefault(acc.key, [0, 0])[1 if acc.store else 0] += acc.n_in
            if acc.store:
                self._stored_names.add(acc.name)
        if acc.store:
            self.stores += 1
            self.max_store_tile = max(self.max_store_tile, acc.tile)
            self.stored += acc.n_in
        else:
            self.loads += 1
            self.max_load_tile = max(self.max_load_tile, acc.tile)
            self.loaded += acc.n_in
        if acc.n_bad:
            self.out_of_bounds += acc.n_bad
            if len(self.oob_examples) < 3:
                self.oob_examples.append(acc.example)


class _Access:
    """One tl.load/tl.store checked against the tensors of the running launch: it addresses one
    tensor, the one most of its active lanes point into; a lane past that tensor's extent is out of
    bounds even if it lands in a neighbour."""

    def __init__(self, ptrs, mask, store: bool):
        p = np.asarray(ptrs).astype(np.uint64, copy=False)
        m = np.ones(p.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), p.shape)
        self.store, self.tile, self.key, self.name = store, int(p.size), None, ""
        self.ok = np.zeros(p.shape, dtype=bool)
        best = 0
        for name, lo, hi in _LAUNCH["args"]:
            here = m & (p >= np.uint64(lo)) & (p < np.uint64(hi))
            n = int(here.sum())
            if n > best:
                best, self.key, self.name, self.ok = n, (lo, hi), name, here
        self.n_in = best
        bad = m & ~self.ok
        self.n_bad = int(bad.sum())
        self.example = ""
        if self.n_bad:
            idx = tuple(int(i[0]) for i in np.nonzero(bad))
            self.example = (f"a tl.{'store' if store else 'load'} of a {tuple(p.shape)} block in program "
                            f"{_LAUNCH['program']} of {_LAUNCH['kernel']}: lane {idx} points outside the tensor it "
                            "reads or writes (mask it)")
        self.changed = self.n_bad > 0


_ACTIVE: list = []                       # the probes open now (watch() blocks, innermost last)
_LAUNCH = {"args": [], "program": (0, 0, 0), "kernel": "a kernel"}
_GUARD = {"installed": False}


def _tensors(names, values):
    import torch
    out = []
    for name, v in zip(names, values):
        items = v if isinstance(v, tuple) else (v,)
        for j, item in enumerate(items):
            base = item if isinstance(item, torch.Tensor) else getattr(item, "base", None)
            if isinstance(base, torch.Tensor):
                out.append((name if len(items) == 1 else f"{name}[{j}]", base))
    return out


def install_guard() -> bool:
    """Route every load and store of Triton's interpreter through the bounds check, for good: a
    lane outside the tensor it addresses is not performed (so a missing mask never corrupts the
    kernel's memory or crashes it, also outside a `watch()` block), and open probes record it.
    Idempotent; returns whether the guard is in place (False without the interpreter)."""
    if _GUARD["installed"]:
        return True
    if not interpreting():
        return False
    from triton.runtime import interpreter as interp
    builder = interp.interpreter_builder
    ge = interp.GridExecutor
    orig_call, orig_init = ge.__call__, ge._init_args_hst
    orig_load, orig_store = builder.create_masked_load, builder.create_masked_store
    orig_grid, orig_idx = builder.set_grid_dim, builder.set_grid_idx

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = orig_init(self, args_dev, kwargs)
        names = list(self.arg_names[:len(args_hst)]) + list(kwargs_hst)
        _LAUNCH["args"] = [(n, *_extent(t)) for n, t in _tensors(names, list(args_hst) + list(kwargs_hst.values()))]
        return args_hst, kwargs_hst

    def call(self, *args_dev, **kwargs):
        outer = dict(_LAUNCH)
        _LAUNCH["kernel"] = getattr(self.fn, "__name__", "a kernel")
        probes = list(_ACTIVE)
        where = getattr(getattr(self.fn, "__code__", None), "co_filename", "")
        for probe in probes:
            probe.launches += 1
            probe.kernels.append(_LAUNCH["kernel"])
            probe.kernel_files.append(where)
            probe._stored_names = set()
        try:
            return orig_call(self, *args_dev, **kwargs)
        finally:
            _LAUNCH.update(outer)
            names = list(self.arg_names[:len(args_dev)]) + [k for k in kwargs if k in self.arg_names]
            values = list(args_dev) + [kwargs[k] for k in kwargs if k in self.arg_names]
            for name, t in _tensors(names, values):
                for probe in probes:
                    if name in probe._stored_names:
                        probe._snapshots[t.data_ptr()] = t.detach().clone().cpu()

    def set_grid_dim(nx, ny, nz):
        for probe in _ACTIVE:
            probe.programs.append(int(nx) * int(ny) * int(nz))
        return orig_grid(nx, ny, nz)

    def set_grid_idx(x, y, z):
        _LAUNCH["program"] = (int(x), int(y), int(z))
        return orig_idx(x, y, z)

    # the builder's signatures differ between triton versions: only the first arguments are read
    def load(ptrs, mask, *rest, **kw):
        acc = _Access(ptrs.data, mask.data, store=False)
        for probe in _ACTIVE:
            probe._record(acc)
        if acc.changed:
            mask = interp.TensorHandle(acc.ok, mask.dtype)   # the stray lanes are not performed
        return orig_load(ptrs, mask, *rest, **kw)

    def store(ptrs, value, mask, *rest, **kw):
        acc = _Access(ptrs.data, mask.data, store=True)
        for probe in _ACTIVE:
            probe._record(acc)
        if acc.changed:
            mask = interp.TensorHandle(acc.ok, mask.dtype)
        return orig_store(ptrs, value, mask, *rest, **kw)

    orig_device_call = interp.InterpretedFunction.__call__

    def device_call(self, *args, **kwargs):   # a @triton.jit function called from inside a kernel
        where = getattr(getattr(self.fn, "__code__", None), "co_filename", "")
        for probe in _ACTIVE:
            probe.kernel_files.append(where)
        return orig_device_call(self, *args, **kwargs)

    interp.InterpretedFunction.__call__ = device_call
    ge.__call__, ge._init_args_hst = call, init_args
    builder.create_masked_load, builder.create_masked_store = load, store
    builder.set_grid_dim, builder.set_grid_idx = set_grid_dim, set_grid_idx
    _GUARD["installed"] = True
    return True


@contextlib.contextmanager
def watch():
    """Observe every interpreted kernel launched inside the block; yields a KernelProbe."""
    require_interpreter()
    install_guard()
    probe = KernelProbe()
    _ACTIVE.append(probe)
    try:
        yield probe
    finally:
        _ACTIVE.remove(probe)


# ---------------------------------------------------------------- what a test cell calls

#: torch calls that would do an exercise's arithmetic outside the kernel (exact names, as
#: `TensorOpRecorder` records them); the wrapper may allocate, check, view and launch.
BANNED = {
    "softmax": ("softmax", "log_softmax", "exp", "exp_", "sum", "amax", "max", "logsumexp", "sub", "div", "__sub__",
                "__truediv__"),
    "matmul": ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "einsum", "dot", "linear", "tensordot",
               "mul", "__mul__", "sum"),
    "attention": ("softmax", "scaled_dot_product_attention", "matmul", "__matmul__", "bmm", "einsum", "logsumexp",
                  "exp", "mm", "baddbmm"),
    "cross_entropy": ("softmax", "log_softmax", "logsumexp", "cross_entropy", "nll_loss", "exp", "log", "gather",
                      "take_along_dim", "sub", "__sub__"),
}


def run_watched(fn, *args, **kwargs):
    """(result, probe): `fn(*args, **kwargs)` with every kernel it launches observed (`watch`) and
    the torch calls it makes recorded (`probe.torch_ops`). Raises the AssertionError of
    `require_interpreter` when triton is missing or not interpreting."""
    from .numerics import TensorOpRecorder
    with watch() as probe:
        rec = TensorOpRecorder()
        with rec:
            result = fn(*args, **kwargs)
    probe.torch_ops = list(rec.ops)
    return result, probe


def dense_attention(q, k, v, causal: bool = False, scale: float | None = None):
    """(O, L) in float64 from the dense formula, the oracle of the attention tests: O = softmax(S) v,
    L = logsumexp(S) per row, S = scale * q k^T (scale 1/sqrt(d)), causal: query i sees keys j <= i."""
    import math
    import torch
    qd, kd, vd = (t.double() for t in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = qd @ kd.transpose(-1, -2) * scale
    if causal:
        s_q, s_k = s.shape[-2:]
        s = s.masked_fill(torch.ones(s_q, s_k, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ vd, torch.logsumexp(s, -1)


def expect_kernel(probe, outputs, what: str, *, max_tile: int, stored, banned: str,
                  reads: tuple = (), programs: int | None = None) -> None:
    """The checks every Triton exercise shares, in a fixed order (docs/GRADING.md rule 2):
    one kernel launch (and `programs` programs when given), no tl.load/tl.store larger than
    `max_tile` elements, no lane outside its tensor, `(tensor, lo, hi, label)` in `reads`: active
    elements loaded from that tensor within [lo, hi], exactly `stored` elements written (or within
    a (lo, hi) pair), each of
    `outputs` exactly what a kernel stored, no kernel (or @triton.jit helper) from solutions_lib, and
    none of the exercise's `banned` torch calls."""
    from .grading import expect_between, expect_equal
    expect_equal(probe.launches, 1, f"{what}: kernel launches",
                 hint="one fused kernel: the wrapper checks, allocates and launches once")
    if programs is not None:
        expect_equal(probe.total_programs, int(programs), f"{what}: programs in the grid",
                     hint="launch one program per output tile (the grid the task states)")
    expect_between(max(probe.max_load_tile, probe.max_store_tile), 1, int(max_tile),
                   f"{what}: largest block one tl.load or tl.store moved (elements)",
                   hint="every tl.arange must come from the BLOCK arguments (a padded head dim at most): "
                        "stream the data through tiles instead of loading it whole")
    expect_equal(probe.out_of_bounds, 0, f"{what}: active lanes outside the tensor they address",
                 hint="mask the ragged edge: " + (probe.oob_examples[0] if probe.oob_examples else "") )
    for t, lo, hi, label in reads:
        expect_between(probe.loaded_from(t), int(lo), int(hi), f"{what}: elements loaded from {label}",
                       hint=f"the task's budget of reads of {label}")
    if isinstance(stored, tuple):
        expect_between(probe.stored, int(stored[0]), int(stored[1]), f"{what}: elements stored by the kernel",
                       hint="write the outputs the task names, each element once, and nothing else (no scratch copies)")
    else:
        expect_equal(probe.stored, int(stored), f"{what}: elements stored by the kernel",
                     hint="write each output element once and nothing else (no scratch copies)")
    for i, out in enumerate(outputs):
        expect_equal(probe.returned_from_kernel(out), True, f"{what}: output {i} is what your kernel stored",
                     hint="return the tensor your kernel wrote; do the arithmetic inside the kernel")
    import os
    lib = os.path.dirname(os.path.abspath(__file__)) + os.sep
    expect_equal(sorted({os.path.basename(f) for f in probe.kernel_files if os.path.abspath(f).startswith(lib)}), [],
                 f"{what}: kernels taken from the course's library",
                 hint="write the kernel yourself (the course's Triton kernels are not an answer)")
    names = set(BANNED[banned])
    expect_equal(sorted({op for op in probe.torch_ops if op in names}), [], f"{what}: torch calls doing the work",
                 hint="the wrapper only checks arguments, allocates and launches; the math belongs in the kernel")


_install_on_import()
