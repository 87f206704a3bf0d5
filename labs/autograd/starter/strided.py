"""Part 4 — tensors, storage and views: the lifecycle of a tensor.

A torch tensor is a *view* of a flat storage: element [i0, i1, ...] lives at
storage[offset + i0*stride0 + i1*stride1 + ...]. transpose, permute, slicing
and (when possible) view only make a new (shape, stride, offset) over the SAME
storage: no data moves. `contiguous()` copies only when the strides are not
the row-major ones. README.md, "Part 4: storage, strides and views", walks
through each rule; the grader replays random sequences of these operations on
a real torch tensor and on yours and compares shape, stride, offset,
is_contiguous, values, and whether storage is shared.
"""

from __future__ import annotations


class Storage:
    """A flat list of numbers; two tensors share storage iff they hold the same Storage object."""

    def __init__(self, values: list[float]) -> None:
        self.values = list(values)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides: the last dimension moves fastest."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class StridedTensor:
    def __init__(self, storage: Storage, shape: tuple[int, ...], stride: tuple[int, ...], offset: int = 0) -> None:
        self.storage, self.shape, self.stride, self.offset = storage, tuple(shape), tuple(stride), offset

    @classmethod
    def from_list(cls, values: list[float], shape: tuple[int, ...]) -> "StridedTensor":
        if _numel(shape) != len(values):
            raise ValueError(f"{len(values)} values cannot fill shape {shape}")
        return cls(Storage(values), tuple(shape), contiguous_strides(tuple(shape)), 0)

    def numel(self) -> int:
        return _numel(self.shape)

    def data_ptr(self) -> int:
        """Index of the first element in the storage (torch: storage_offset())."""
        return self.offset

    def shares_storage(self, other: "StridedTensor") -> bool:
        return self.storage is other.storage

    def is_contiguous(self) -> bool:
        """torch's rule: row-major strides, ignoring dimensions of size 1; an empty tensor is contiguous."""
        raise NotImplementedError("is_contiguous: see README.md, section \"Part 4: storage, strides and views\"")

    def _element(self, index: tuple[int, ...]) -> float:
        return self.storage.values[self.offset + sum(i * s for i, s in zip(index, self.stride))]

    def tolist(self):
        def build(dim: int, prefix: tuple[int, ...]):
            if dim == len(self.shape):
                return self._element(prefix)
            return [build(dim + 1, prefix + (i,)) for i in range(self.shape[dim])]

        return build(0, ())

    def transpose(self, dim0: int, dim1: int) -> "StridedTensor":
        raise NotImplementedError("transpose: see README.md, section \"Part 4: storage, strides and views\"")

    def permute(self, *dims: int) -> "StridedTensor":
        raise NotImplementedError("permute: see README.md, section \"Part 4: storage, strides and views\"")

    def __getitem__(self, index) -> "StridedTensor":
        """Integers (drop the dimension) and slices with a positive step, one per leading dimension."""
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) > len(self.shape):
            raise IndexError(f"too many indices for a {len(self.shape)}-d tensor")
        shape, stride, offset = [], [], self.offset
        raise NotImplementedError("__getitem__: see README.md, section \"Part 4: storage, strides and views\"")
        return StridedTensor(self.storage, tuple(shape), tuple(stride), offset)

    def view(self, *shape: int) -> "StridedTensor":
        """The same storage seen with a new shape (one -1 is inferred). Raises
        RuntimeError, like torch, when no strides can express it without a copy."""
        raise NotImplementedError("view: see README.md, section \"Part 4: storage, strides and views\"")

    def contiguous(self) -> "StridedTensor":
        """self when already contiguous; else a row-major copy in a NEW storage."""
        raise NotImplementedError("contiguous: see README.md, section \"Part 4: storage, strides and views\"")


def _view_strides(old_shape, old_stride, new_shape):
    """Strides for `new_shape` over the same memory, or None (ATen's computeStride).

    Walk the old dimensions from the last, grouping them into "chunks" that are
    contiguous with each other (stride[d-1] == size[d] * stride[d]); each chunk
    must be split exactly into a run of new dimensions.
    """
    raise NotImplementedError("_view_strides: see README.md, section \"Part 4: storage, strides and views\"")
