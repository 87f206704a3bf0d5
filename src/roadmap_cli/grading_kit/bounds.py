"""Out-of-bounds detection for Triton kernels, and NaN guard bands around kernel inputs.

Two tools that graders of kernel labs use together, both inside `@kit.learner_side`
adapter functions (they patch the learner process):

* `nan_guarded(t, guard=...)`: a copy of `t` (same shape, same dim order in memory)
  that lives inside a bigger NaN-filled buffer: NaN padding after the innermost dim
  of every row and a flat guard band of at least `guard` elements before the first
  and after the last element. A load past an edge reads NaN (which poisons the
  output deterministically: no kill depends on whatever bytes lie in memory), never
  another tensor and never unmapped memory (no segfault).
* `check_bounds()`: under the Triton interpreter, every `tl.load` / `tl.store` lane
  whose mask is on is checked BEFORE memory is touched: its address must be an
  element of one of the launch's tensor arguments (the view, not its storage: a read
  of the guard band is a read past the edge). Lanes that fail are recorded as
  plain-data violations ("read past the end of K at [0, 1, N+3, 5]") and then
  masked off, so the kernel finishes and the process never reads unmapped memory.
  Masked-off lanes are never checked: a masked load past the edge is correct code.
  A masked load without `other=` returns NaN in its masked-off lanes (Triton leaves
  them undefined), so a result that depends on them fails deterministically.

On a GPU `check_bounds()` records nothing (the interpreter is not running); the NaN
guard bands still catch reads that change the output, and the graders' sentinel-
filled output buffers catch writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

MAX_EXAMPLES = 3  # example indices kept per (kernel, op, tensor)


# ---------------------------------------------------------------- NaN guard bands


def nan_guarded(t, guard: int = 4096, row_pad: int = 16, fill: float = float("nan")):
    """A copy of `t` whose memory neighbours are `fill` (NaN by default).

    The copy keeps `t`'s shape and the order of its dims in memory (a transposed view
    stays transposed), but each run of the innermost dim is followed by `row_pad`
    NaNs, and the whole block is preceded and followed by at least `guard` NaNs.
    Choose `guard` >= one full tile in elements (rows x row stride) so that a
    missing mask on a whole tile still lands in the guard band.
    Integer tensors are padded with -1 (or `fill` if it is an int).
    """
    import torch

    if t.dim() == 0:
        return t.clone()
    if not t.dtype.is_floating_point:
        fill = fill if isinstance(fill, int) else -1
    # Memory order: dims from the largest stride to the smallest (ties: later dim inner).
    order = sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))
    inner = order[-1]
    padded_shape = [t.shape[d] + (row_pad if d == inner else 0) for d in order]
    numel = 1
    for s in padded_shape:
        numel *= s
    row_stride = padded_shape[-1]
    guard = max(int(guard), row_stride)
    storage = torch.full((guard + numel + guard,), fill, dtype=t.dtype, device=t.device)
    block = storage[guard : guard + numel].view(padded_shape)
    block = block.narrow(len(order) - 1, 0, t.shape[inner])
    # Back to t's dim order: position i of `block` holds dim order[i] of t.
    view = block.permute([order.index(d) for d in range(t.dim())])
    view.copy_(t)
    return view


def guard_for_tile(rows: int, row_stride: int) -> int:
    """Guard-band size in elements that covers `rows` rows of `row_stride` elements."""
    return max(4096, rows * row_stride)


# ---------------------------------------------------------------- bounds checking


@dataclasses.dataclass
class _Arg:
    """One tensor argument of a launch: where its elements live."""

    name: str
    base: int  # address of element [0, 0, ...]
    itemsize: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    storage_lo: int
    storage_hi: int
    offsets: object = None  # sorted numpy array of element byte offsets from base (lazy)
    dense_lo: int = 0
    dense_hi: int = -1  # [dense_lo, dense_hi) in bytes from base when the view is dense
    _nested: object = None  # cached nested_order(): list of dims, [] when not nested

    def element_offsets(self):
        import numpy as np

        if self.offsets is None:
            grids = np.zeros(1, dtype=np.int64)
            for size, stride in zip(self.shape, self.strides):
                grids = (grids[:, None] + np.arange(size, dtype=np.int64)[None, :] * stride).reshape(-1)
            self.offsets = np.unique(grids * self.itemsize)
        return self.offsets

    def nested_order(self):
        """Dims (size > 1) from outer to inner when the view is a nested, non-overlapping
        layout (each stride >= the extent of the dims inside it), else None."""
        if self.__dict__.get("_nested") is not None:
            return self._nested or None
        dims = sorted((d for d in range(len(self.shape)) if self.shape[d] > 1), key=lambda d: (-self.strides[d], d))
        extent = 1
        ok = all(self.strides[d] > 0 for d in dims)
        for d in reversed(dims):
            if not ok or self.strides[d] < extent:
                ok = False
                break
            extent = self.strides[d] * self.shape[d]
        self._nested = dims if ok else []
        return dims if ok else None

    def contains(self, addrs):
        """Boolean mask: which addresses are (the start of) an element of this view."""
        import numpy as np

        rel = addrs.astype(np.int64) - self.base
        if self.dense_hi >= 0:
            return (rel >= self.dense_lo) & (rel < self.dense_hi) & (rel % self.itemsize == 0)
        dims = self.nested_order()
        if dims is not None:  # peel the index digit by digit: cheap, no table of offsets
            ok = rel % self.itemsize == 0
            rel = rel // self.itemsize
            for d in dims:
                i = rel // self.strides[d]
                ok &= (i >= 0) & (i < self.shape[d])
                rel = rel - i * self.strides[d]
            return ok & (rel == 0)
        offs = self.element_offsets()
        if offs.size == 0:
            return np.zeros(rel.shape, dtype=bool)
        pos = np.clip(np.searchsorted(offs, rel), 0, offs.size - 1)
        return offs[pos] == rel

    def describe(self, addr: int) -> str:
        """Where `addr` lies relative to this view, as an index with N+k / -k for out-of-range dims."""
        rel = int(addr) - self.base
        if rel % self.itemsize:
            return f"byte offset {rel} (not aligned to its {self.itemsize}-byte elements)"
        rel //= self.itemsize
        # Peel dims from the largest stride to the smallest: the natural row/column reading.
        # Outer dims are clamped to their range so the overflow shows up in the row dim
        # (the second-innermost): the element after the last one is "row N+0", not "batch B".
        # Size-1 dims go first (always index 0); stride ties: the later dim is the inner one.
        order = sorted(range(len(self.shape)), key=lambda d: (self.shape[d] != 1, -abs(self.strides[d]), d))
        index = [0] * len(self.shape)
        for pos, d in enumerate(order):
            stride = self.strides[d]
            if stride == 0:
                continue
            i = rel // stride
            if pos < len(order) - 2:
                i = min(max(i, 0), self.shape[d] - 1)
            index[d] = i
            rel -= i * stride
        index[order[-1]] += rel // max(1, abs(self.strides[order[-1]]) or 1) if rel else 0
        parts = []
        for i, size in zip(index, self.shape):
            parts.append(f"{size}+{i - size}" if i >= size else str(i))
        return "[" + ", ".join(parts) + "]"

    def relation(self, addr: int) -> str:
        lo = self.base + self.dense_lo if self.dense_hi >= 0 else self.base + int(self.element_offsets()[0])
        return "before the start of" if addr < lo else "past the edge of"


def _args_of_launch(arg_names, args, kwargs, labels) -> list[_Arg]:
    import torch

    pairs = list(zip(arg_names, args)) + list(kwargs.items())
    found = []
    for name, value in pairs:
        if not isinstance(value, torch.Tensor):
            continue
        storage = value.untyped_storage()
        item = value.element_size()
        arg = _Arg(
            name=labels.get(storage.data_ptr(), name) if labels else name,
            base=value.data_ptr(),
            itemsize=item,
            shape=tuple(value.shape),
            strides=tuple(value.stride()),
            storage_lo=storage.data_ptr(),
            storage_hi=storage.data_ptr() + storage.nbytes(),
        )
        if value.numel() and value.is_contiguous():
            arg.dense_lo, arg.dense_hi = 0, value.numel() * item
        elif value.numel() == 0:
            arg.dense_lo, arg.dense_hi = 0, 0
        found.append(arg)
    return found


class BoundsReport:
    """Violations seen while `check_bounds()` was active, as plain data."""

    def __init__(self) -> None:
        self.launches = 0
        self.checked_accesses = 0
        self._by_key: dict[tuple[str, str, str, str], dict] = {}

    def add(self, kernel: str, op: str, tensor: str, relation: str, count: int, examples: list[str]) -> None:
        key = (kernel, op, tensor, relation)
        entry = self._by_key.setdefault(key, {"count": 0, "examples": []})
        entry["count"] += count
        for ex in examples:
            if len(entry["examples"]) < MAX_EXAMPLES and ex not in entry["examples"]:
                entry["examples"].append(ex)

    @property
    def violations(self) -> list[str]:
        """One line per (kernel, read/write, tensor): what went out of bounds, how often, where."""
        lines = []
        for (kernel, op, tensor, relation), entry in self._by_key.items():
            verb = "read" if op == "load" else "wrote"
            lanes = "lane" if entry["count"] == 1 else "lanes"
            lines.append(
                f"{kernel}: {verb} {relation} {tensor} at {', '.join(entry['examples'])} "
                f"({entry['count']} unmasked {lanes} in all)"
            )
        return lines

    def as_plain(self) -> dict:
        return {"launches": self.launches, "checked_accesses": self.checked_accesses, "violations": self.violations}


@contextlib.contextmanager
def check_bounds(labels: dict | None = None) -> Iterator[BoundsReport]:
    """Check every unmasked tl.load/tl.store lane of every interpreted launch while active.

    `labels` maps a tensor's storage data_ptr() to the name a message should use
    (e.g. {q.untyped_storage().data_ptr(): "q"}); other tensors are named after the
    kernel's parameter. Outside the interpreter this records nothing.
    """
    report = BoundsReport()
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a dependency
        yield report
        return
    builder = interpreter.interpreter_builder
    executor = interpreter.GridExecutor
    original_init = executor._init_args_hst
    original_load = builder.create_masked_load
    original_store = builder.create_masked_store
    current: dict = {"kernel": "?", "args": []}

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init(self, args_dev, kwargs)
        current["kernel"] = getattr(self.fn, "__name__", "kernel")
        current["args"] = _args_of_launch(self.arg_names, args_hst, kwargs_hst, labels or {})
        report.launches += 1
        return args_hst, kwargs_hst

    def screen(op: str, ptrs, mask):
        """Return a mask with every out-of-bounds lane turned off, recording those lanes."""
        import numpy as np

        addrs = np.asarray(ptrs.data).astype(np.uint64)
        on = np.broadcast_to(np.asarray(mask.data, dtype=bool), addrs.shape)
        live = addrs[on]
        report.checked_accesses += int(live.size)
        if live.size == 0:
            return mask
        ok = np.zeros(live.shape, dtype=bool)
        for arg in current["args"]:
            ok |= arg.contains(live)
            if ok.all():
                return mask
        bad = live[~ok]
        _record(op, bad)
        good = on.copy()
        good[on] = ok
        return type(mask)(good, mask.dtype)

    def _record(op: str, bad) -> None:
        args = current["args"]
        groups: dict[tuple[str, str], list[int]] = {}
        for addr in bad.tolist():
            owner = next((a for a in args if a.storage_lo <= addr < a.storage_hi), None)
            if owner is None and args:  # outside every argument's memory: blame the nearest one
                owner = min(args, key=lambda a: min(abs(addr - a.storage_lo), abs(addr - a.storage_hi)))
            name = owner.name if owner else "every tensor argument"
            relation = owner.relation(addr) if owner else "outside"
            groups.setdefault((name, relation), []).append(addr)
            if len(groups[(name, relation)]) > 10_000:
                break
        for (name, relation), addrs in groups.items():
            owner = next((a for a in args if a.name == name), None)
            examples = [owner.describe(a) if owner else hex(a) for a in addrs[:MAX_EXAMPLES]]
            report.add(current["kernel"], op, name, relation, len(addrs), examples)

    def load(ptrs, mask, other, *rest, **kwargs):
        if other is None:
            # No `other=`: Triton leaves masked-off lanes undefined (the interpreter gives 0,
            # a GPU whatever is in the registers). NaN makes a kernel that lets such a lane
            # reach its result fail here too, deterministically.
            import numpy as np

            dtype_tt = ptrs.get_element_ty()
            dtype_np = interpreter._get_np_dtype(dtype_tt)
            if np.issubdtype(dtype_np, np.floating):
                other = type(ptrs)(np.full(np.shape(ptrs.data), np.nan, dtype=dtype_np), dtype_tt)
        return original_load(ptrs, screen("load", ptrs, mask), other, *rest, **kwargs)

    def store(ptrs, value, mask, *rest, **kwargs):
        return original_store(ptrs, value, screen("store", ptrs, mask), *rest, **kwargs)

    executor._init_args_hst = init_args
    builder.create_masked_load = load
    builder.create_masked_store = store
    try:
        yield report
    finally:
        executor._init_args_hst = original_init
        builder.create_masked_load = original_load
        builder.create_masked_store = original_store


def storage_labels(**tensors) -> dict:
    """{storage data_ptr: name} for `check_bounds(labels=...)`: name the grader's own inputs."""
    return {t.untyped_storage().data_ptr(): name for name, t in tensors.items() if t is not None}
