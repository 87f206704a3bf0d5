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
        # BEGIN SOLUTION
        if self.numel() == 0:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.stride)):
            if size != 1:
                if stride != expected:
                    return False
                expected *= size
        return True
        # STARTER
        # raise NotImplementedError("is_contiguous: see README.md, section \"Part 4: storage, strides and views\"")
        # END SOLUTION

    def _element(self, index: tuple[int, ...]) -> float:
        return self.storage.values[self.offset + sum(i * s for i, s in zip(index, self.stride))]

    def tolist(self):
        def build(dim: int, prefix: tuple[int, ...]):
            if dim == len(self.shape):
                return self._element(prefix)
            return [build(dim + 1, prefix + (i,)) for i in range(self.shape[dim])]

        return build(0, ())

    def transpose(self, dim0: int, dim1: int) -> "StridedTensor":
        # BEGIN SOLUTION
        nd = len(self.shape)
        dim0, dim1 = dim0 % nd, dim1 % nd
        shape, stride = list(self.shape), list(self.stride)
        shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
        stride[dim0], stride[dim1] = stride[dim1], stride[dim0]
        return StridedTensor(self.storage, tuple(shape), tuple(stride), self.offset)
        # STARTER
        # raise NotImplementedError("transpose: see README.md, section \"Part 4: storage, strides and views\"")
        # END SOLUTION

    def permute(self, *dims: int) -> "StridedTensor":
        # BEGIN SOLUTION
        nd = len(self.shape)
        dims = tuple(d % nd for d in dims)
        if sorted(dims) != list(range(nd)):
            raise RuntimeError(f"permute: {dims} is not a permutation of {nd} dimensions")
        return StridedTensor(self.storage, tuple(self.shape[d] for d in dims), tuple(self.stride[d] for d in dims),
                             self.offset)
        # STARTER
        # raise NotImplementedError("permute: see README.md, section \"Part 4: storage, strides and views\"")
        # END SOLUTION

    def __getitem__(self, index) -> "StridedTensor":
        """Integers (drop the dimension) and slices with a positive step, one per leading dimension."""
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) > len(self.shape):
            raise IndexError(f"too many indices for a {len(self.shape)}-d tensor")
        shape, stride, offset = [], [], self.offset
        # BEGIN SOLUTION
        for dim, item in enumerate(index):
            size = self.shape[dim]
            if isinstance(item, int):
                if not -size <= item < size:
                    raise IndexError(f"index {item} is out of bounds for dimension {dim} with size {size}")
                offset += (item % size) * self.stride[dim]
            elif isinstance(item, slice):
                start, stop, step = item.indices(size)
                if step <= 0:
                    raise ValueError("step must be greater than zero")
                offset += start * self.stride[dim]
                shape.append(len(range(start, stop, step)))
                stride.append(self.stride[dim] * step)
            else:
                raise TypeError(f"unsupported index {item!r}")
        shape += self.shape[len(index):]
        stride += self.stride[len(index):]
        # STARTER
        # raise NotImplementedError("__getitem__: see README.md, section \"Part 4: storage, strides and views\"")
        # END SOLUTION
        return StridedTensor(self.storage, tuple(shape), tuple(stride), offset)

    def view(self, *shape: int) -> "StridedTensor":
        """The same storage seen with a new shape (one -1 is inferred). Raises
        RuntimeError, like torch, when no strides can express it without a copy."""
        # BEGIN SOLUTION
        shape = list(shape)
        if shape.count(-1) > 1:
            raise RuntimeError("only one dimension can be inferred")
        if -1 in shape:
            known = _numel([s for s in shape if s != -1])
            if known == 0 or self.numel() % known:
                raise RuntimeError(f"shape {tuple(shape)} is invalid for input of size {self.numel()}")
            shape[shape.index(-1)] = self.numel() // known
        shape = tuple(shape)
        if _numel(shape) != self.numel():
            raise RuntimeError(f"shape {shape} is invalid for input of size {self.numel()}")
        stride = _view_strides(self.shape, self.stride, shape)
        if stride is None:
            raise RuntimeError("view size is not compatible with input tensor's size and stride: use .reshape(...)")
        return StridedTensor(self.storage, shape, stride, self.offset)
        # STARTER
        # raise NotImplementedError("view: see README.md, section \"Part 4: storage, strides and views\"")
        # END SOLUTION

    def contiguous(self) -> "StridedTensor":
        """self when already contiguous; else a row-major copy in a NEW storage."""
        # BEGIN SOLUTION
        if self.is_contiguous():
            return self
        flat: list[float] = []

        def walk(value) -> None:
            if isinstance(value, list):
                for item in value:
                    walk(item)
            else:
                flat.append(value)

        walk(self.tolist())
        return StridedTensor.from_list(flat, self.shape)
        # STARTER
        # raise NotImplementedError("contiguous: see README.md, section \"Part 4: storage, strides and views\"")
        # END SOLUTION


def _view_strides(old_shape, old_stride, new_shape):
    """Strides for `new_shape` over the same memory, or None (ATen's computeStride).

    Walk the old dimensions from the last, grouping them into "chunks" that are
    contiguous with each other (stride[d-1] == size[d] * stride[d]); each chunk
    must be split exactly into a run of new dimensions.
    """
    # BEGIN SOLUTION
    if _numel(old_shape) == 0:
        return tuple(old_stride) if tuple(old_shape) == tuple(new_shape) else contiguous_strides(new_shape)
    if not old_shape:  # a 0-d tensor: every new dim is 1
        return tuple(1 for _ in new_shape)
    new_stride = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_stride[-1]
    tensor_numel, view_numel = 1, 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        chunk_ends = tensor_d == 0 or (old_shape[tensor_d - 1] != 1
                                       and old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride)
        if chunk_ends:
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_stride[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_stride[tensor_d - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        return None
    return tuple(new_stride)
    # STARTER
    # raise NotImplementedError("_view_strides: see README.md, section \"Part 4: storage, strides and views\"")
    # END SOLUTION
