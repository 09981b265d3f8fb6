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

The probe only measures; the test cell decides (expect_equal / expect_between on the numbers).
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

__all__ = ["KernelProbe", "watch", "require_interpreter", "interpreting", "interpreter_compat", "cdiv",
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
        self.max_load_tile = 0
        self.max_store_tile = 0
        self.loaded = 0
        self.stored = 0
        self.loads = 0
        self.stores = 0
        self.out_of_bounds = 0
        self.oob_examples: list[str] = []
        self._by_range: dict[tuple[int, int], list[int]] = {}   # (lo, hi) -> [loaded, stored]
        self._args: list[tuple[str, int, int]] = []             # this launch: (name, lo, hi)
        self._stored_names: set[str] = set()
        self._snapshots: dict[int, object] = {}                 # data_ptr -> tensor after its last store
        self._program = (0, 0, 0)

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

    # ---- recording (called from the interpreter)
    def _register(self, names_and_tensors):
        self._args = []
        for name, t in names_and_tensors:
            lo, hi = _extent(t)
            self._args.append((name, lo, hi))
            self._by_range.setdefault((lo, hi), [0, 0])

    def _access(self, ptrs, mask, store: bool):
        p = np.asarray(ptrs).astype(np.uint64, copy=False)
        tile = int(p.size)
        m = np.ones(p.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), p.shape)
        # one tl.load/tl.store addresses one tensor: the one most of its active lanes point into;
        # a lane past that tensor's end counts as out of bounds even if it lands in a neighbour
        inside = np.zeros(p.shape, dtype=bool)
        best = None
        for name, lo, hi in self._args:
            here = m & (p >= np.uint64(lo)) & (p < np.uint64(hi))
            n = int(here.sum())
            if n and (best is None or n > best[0]):
                best = (n, name, lo, hi, here)
        if best is not None:
            n, name, lo, hi, inside = best
            self._by_range[(lo, hi)][1 if store else 0] += n
            if store:
                self._stored_names.add(name)
        bad = m & ~inside
        nbad = int(bad.sum())
        active = int(m.sum()) - nbad
        if store:
            self.stores += 1
            self.max_store_tile = max(self.max_store_tile, tile)
            self.stored += active
        else:
            self.loads += 1
            self.max_load_tile = max(self.max_load_tile, tile)
            self.loaded += active
        if nbad:
            self.out_of_bounds += nbad
            if len(self.oob_examples) < 3:
                idx = tuple(int(i[0]) for i in np.nonzero(bad))
                self.oob_examples.append(
                    f"a tl.{'store' if store else 'load'} of a {tuple(p.shape)} block in program {self._program} of "
                    f"{self.kernels[-1] if self.kernels else 'a kernel'}: lane {idx} points outside "
                    "the tensor it reads or writes (mask it)")
        return m & inside


@contextlib.contextmanager
def watch():
    """Observe every interpreted kernel launched inside the block; yields a KernelProbe."""
    require_interpreter()
    import torch
    from triton.runtime import interpreter as interp

    probe = KernelProbe()
    builder = interp.interpreter_builder
    ge = interp.GridExecutor
    orig_call, orig_init = ge.__call__, ge._init_args_hst
    orig_load, orig_store = builder.create_masked_load, builder.create_masked_store
    orig_grid, orig_idx = builder.set_grid_dim, builder.set_grid_idx

    def _tensors(names, values):
        out = []
        for name, v in zip(names, values):
            items = v if isinstance(v, tuple) else (v,)
            for j, item in enumerate(items):
                base = getattr(item, "base", item) if not isinstance(item, torch.Tensor) else item
                if isinstance(base, torch.Tensor):
                    out.append((name if len(items) == 1 else f"{name}[{j}]", base))
        return out

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = orig_init(self, args_dev, kwargs)
        names = list(self.arg_names[:len(args_hst)]) + list(kwargs_hst)
        probe._register(_tensors(names, list(args_hst) + list(kwargs_hst.values())))
        return args_hst, kwargs_hst

    def call(self, *args_dev, **kwargs):
        probe.launches += 1
        probe.kernels.append(getattr(self.fn, "__name__", "kernel"))
        probe._stored_names = set()
        try:
            return orig_call(self, *args_dev, **kwargs)
        finally:
            names = list(self.arg_names[:len(args_dev)]) + [k for k in kwargs if k in self.arg_names]
            values = list(args_dev) + [kwargs[k] for k in kwargs if k in self.arg_names]
            for name, t in _tensors(names, values):
                if name in probe._stored_names:
                    probe._snapshots[t.data_ptr()] = t.detach().clone().cpu()

    def set_grid_dim(nx, ny, nz):
        probe.programs.append(int(nx) * int(ny) * int(nz))
        return orig_grid(nx, ny, nz)

    def set_grid_idx(x, y, z):
        probe._program = (int(x), int(y), int(z))
        return orig_idx(x, y, z)

    # the builder's signatures differ between triton versions: only the first arguments are read
    def load(ptrs, mask, *rest, **kw):
        ok = probe._access(ptrs.data, mask.data, store=False)
        if not np.array_equal(ok, np.broadcast_to(np.asarray(mask.data, dtype=bool), ok.shape)):
            mask = interp.TensorHandle(ok, mask.dtype)   # the stray lanes are not performed
        return orig_load(ptrs, mask, *rest, **kw)

    def store(ptrs, value, mask, *rest, **kw):
        ok = probe._access(ptrs.data, mask.data, store=True)
        if not np.array_equal(ok, np.broadcast_to(np.asarray(mask.data, dtype=bool), ok.shape)):
            mask = interp.TensorHandle(ok, mask.dtype)   # the stray lanes are not performed
        return orig_store(ptrs, value, mask, *rest, **kw)

    ge.__call__, ge._init_args_hst = call, init_args
    builder.create_masked_load, builder.create_masked_store = load, store
    builder.set_grid_dim, builder.set_grid_idx = set_grid_dim, set_grid_idx
    try:
        yield probe
    finally:
        ge.__call__, ge._init_args_hst = orig_call, orig_init
        for name in ("create_masked_load", "create_masked_store", "set_grid_dim", "set_grid_idx"):
            builder.__dict__.pop(name, None)



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
    `outputs` exactly what a kernel stored, and none of the exercise's `banned` torch calls."""
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
    names = set(BANNED[banned])
    expect_equal(sorted({op for op in probe.torch_ops if op in names}), [], f"{what}: torch calls doing the work",
                 hint="the wrapper only checks arguments, allocates and launches; the math belongs in the kernel")
