"""What crosses the pipe between the grader process and the learner process.

Requests (grader -> learner) are ordinary pickles: the grader is trusted and
the learner process may unpickle grader-defined classes.

Replies (learner -> grader) are untrusted bytes. The learner side first turns
its return value into *plain data* (`encode`): builtins, and a few `Tagged`
records for tensors, numpy arrays, dtypes and learner proxies. The grader
side reads them with `RestrictedUnpickler`, which can build nothing but
builtin containers, `complex` and `Tagged`; then `decode` turns the records
back into fresh tensors/arrays it owns. A learner-defined class is never
unpickled in the grader process (its `__reduce__`/`__eq__`/`__bool__` would
be learner code running where the verdict is computed).

Framing: an 8-byte little-endian length, then the payload. A reply larger
than MAX_MESSAGE is refused (a learner cannot make the grader allocate
gigabytes).
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import struct
import sys
from typing import Any, Callable

MAX_MESSAGE = 1 << 30  # 1 GiB: the largest tensor data a lab returns is far below
_HEADER = struct.Struct("<Q")
PLAIN_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_MAX_DEPTH = 64
_ORDERED_DICT = __import__("collections").OrderedDict


class Tagged:
    """A typed record inside a reply: kind is one of tensor|ndarray|npscalar|dtype|size|device|ref."""

    __slots__ = ("kind", "data")

    def __init__(self, kind: str, data: Any) -> None:
        self.kind = kind
        self.data = data

    def __reduce__(self):
        return (Tagged, (self.kind, self.data))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tagged) and (self.kind, self.data) == (other.kind, other.data)

    def __hash__(self) -> int:
        return hash((self.kind, self.data))


class WireError(Exception):
    """The peer broke the protocol (closed the pipe, sent garbage or too much)."""


# ------------------------------------------------------------------ framing


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send(fd: int, payload: bytes) -> None:
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def recv(fd: int) -> bytes:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if size > MAX_MESSAGE:
        raise WireError(f"reply of {size} bytes is larger than the {MAX_MESSAGE} byte limit")
    return _read_exact(fd, size)


# ------------------------------------------------- learner side: encoding


def _tensor_record(t) -> Tagged:
    """A detached CPU copy as raw bytes, and the device it lived on; strides
    are kept when the layout is dense and non-overlapping (a transposed view
    stays transposed). The device travels with the bytes: the grader checks
    that a CUDA kernel returned a CUDA tensor on the CPU copy's record
    (grading_kit/placement.py), never by holding a CUDA tensor itself."""
    import torch

    t = t.detach()
    device = str(t.device)
    if t.device.type != "cpu":
        t = t.cpu()
    shape, strides = tuple(t.shape), tuple(t.stride())
    # A layout that can be rebuilt with empty_strided: every element has its own slot.
    span = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(shape) else 0
    dense = all(st > 0 for st in strides) and span == t.numel()
    flat = t.contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return Tagged("tensor", (str(t.dtype).removeprefix("torch."), shape, strides if dense else None, raw, device))


def encode(obj: Any, remember: Callable[[Any], int], _depth: int = 0, _stack: tuple = ()) -> Any:
    """Plain data stays (as a copy); anything else becomes a reference.

    `remember(obj)` stores a learner object and returns its reference id.
    Exact types only: a subclass of int or list may override behaviour
    (`__eq__`, `__index__`) and goes back as a reference.
    """
    kind = type(obj)
    if kind in PLAIN_SCALARS:
        return obj
    if _depth > _MAX_DEPTH or id(obj) in _stack:
        return Tagged("ref", (remember(obj), _type_name(obj)))
    inner = _stack + (id(obj),)
    if kind in (list, tuple, set, frozenset):
        return kind(encode(x, remember, _depth + 1, inner) for x in obj)
    if kind is dict or kind is _ORDERED_DICT:  # an OrderedDict (e.g. a state_dict) comes back as a dict, in order
        return {encode(k, remember, _depth + 1, inner): encode(v, remember, _depth + 1, inner) for k, v in obj.items()}
    torch = sys.modules.get("torch")
    if torch is not None:
        # nn.Parameter is torch's own subclass: its data comes back as a plain tensor.
        if (
            (kind is torch.Tensor or kind is torch.nn.Parameter)
            and obj.layout == torch.strided
            and not obj.is_quantized
            and obj.device.type != "meta"
        ):
            return _tensor_record(obj)
        if kind is torch.dtype:
            return Tagged("dtype", str(obj).removeprefix("torch."))
        if kind is torch.Size:
            return Tagged("size", tuple(int(x) for x in obj))
        if kind is torch.device:
            return Tagged("device", str(obj))
    np = sys.modules.get("numpy")
    if np is not None:
        if kind is np.ndarray and not obj.dtype.hasobject:
            return Tagged("ndarray", (obj.dtype.str, tuple(obj.shape), np.ascontiguousarray(obj).tobytes()))
        if isinstance(obj, np.generic) and kind.__module__ == "numpy" and not obj.dtype.hasobject:
            return Tagged("npscalar", (obj.dtype.str, obj.tobytes()))
    return Tagged("ref", (remember(obj), _type_name(obj), _is_plain_method(obj)))


def _is_plain_method(obj: Any) -> bool:
    """A bound method that its class defines: the grader may cache the
    reference for `obj.method` and skip one round trip per later call."""
    import types

    if type(obj) is not types.MethodType:
        return False
    owner = getattr(obj, "__self__", None)
    name = getattr(obj.__func__, "__name__", "")
    return getattr(type(owner), name, None) is obj.__func__


def _type_name(obj: Any) -> str:
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__


def dumps_reply(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


# --------------------------------------------------- grader side: decoding


class RestrictedUnpickler(pickle.Unpickler):
    """Builds builtin containers, `complex` and `Tagged`, nothing else."""

    ALLOWED = {
        ("builtins", "complex"),
        ("roadmap_cli.grading_kit.wire", "Tagged"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) in self.ALLOWED:
            return Tagged if name == "Tagged" else getattr(__import__("builtins"), name)
        raise WireError(f"the learner process sent an object of type {module}.{name}, which is not plain data")

    def persistent_load(self, pid):
        raise WireError("persistent ids are not allowed in a reply")


def loads_reply(payload: bytes) -> Any:
    try:
        return RestrictedUnpickler(io.BytesIO(payload)).load()
    except WireError:
        raise
    except Exception as exc:  # garbage bytes from a hostile learner process
        raise WireError(f"unreadable reply from the learner process: {type(exc).__name__}: {exc}") from None


def _decode_tensor(data) -> Any:
    """CPU data, always: the grader process never opens a CUDA context (grading_kit/placement.py). A tensor
    the learner returned on another device records it (`kit.learner_device(out)`, `kit.returned_on_cuda`)."""
    import torch

    dtype_name, shape, strides, raw, device_name = data
    dtype = getattr(torch, str(dtype_name), None)
    if not isinstance(dtype, torch.dtype):
        raise WireError(f"unknown tensor dtype {dtype_name!r}")
    try:
        device = torch.device(str(device_name))
    except (RuntimeError, ValueError):
        raise WireError(f"unknown tensor device {device_name!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise WireError(f"a tensor on {device} cannot cross the wire")
    tensor = _decode_cpu_tensor(dtype, shape, strides, raw)
    if device.type == "cpu":
        return tensor
    from roadmap_cli.grading_kit.placement import tag

    return tag(tensor, device)


def _decode_cpu_tensor(dtype, shape, strides, raw) -> Any:
    import torch

    shape = tuple(int(s) for s in shape)
    numel = 1
    for s in shape:
        numel *= s
    if numel == 0:
        flat = torch.empty(0, dtype=dtype)
    else:
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype)
        if flat.numel() != numel:
            raise WireError(f"tensor data of {flat.numel()} elements for shape {shape}")
    dense = flat.reshape(shape)
    if strides is None or tuple(strides) == tuple(dense.stride()):
        return dense
    out = torch.empty_strided(shape, tuple(int(s) for s in strides), dtype=dtype)
    out.copy_(dense)
    return out


# What one reply may decode into, at most, when the grader knows no tighter bound (the learner process's memory
# limit, sandbox.py): the learner could not have held more. A record referenced many times through pickle's memo
# is decoded once and shared, as it was shared on the learner's side (red team A1: an 8 MiB reply referencing
# one tensor 32 times was 467 MiB here); what is left is bounded by this count.
DEFAULT_DECODED_LIMIT = 1 << 30
_CONTAINER_SLOT = 8  # bytes a list/dict slot costs, for the count


class _Decoding:
    def __init__(self, make_ref: Callable[[int, str], Any], limit: int) -> None:
        self.make_ref, self.limit, self.used = make_ref, limit, 0
        self.memo: dict[int, Any] = {}

    def spend(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise WireError(
                f"the reply decodes to more than {self.limit >> 20} MiB (the learner process's limit): "
                "return less data, or a tensor once rather than many copies of it"
            )


def decode(obj: Any, make_ref: Callable[[int, str], Any], _depth: int = 0, *, limit_bytes: int | None = None) -> Any:
    """Rebuild grader-owned objects from a reply; references via `make_ref(id, type_name)`. Refused (WireError)
    when the result would exceed `limit_bytes` of data."""
    return _decode(obj, _Decoding(make_ref, limit_bytes or DEFAULT_DECODED_LIMIT), _depth)


def _decode(obj: Any, state: _Decoding, _depth: int) -> Any:
    kind = type(obj)
    if kind in PLAIN_SCALARS or kind is bytearray:
        return obj  # the unpickled object itself: no copy
    if _depth > _MAX_DEPTH + 2:
        raise WireError("reply nested too deeply")
    key = id(obj)
    if key in state.memo:
        return state.memo[key]  # referenced again: the same grader object (no copy, no new cost)
    if kind in (list, tuple, set, frozenset):
        state.spend(_CONTAINER_SLOT * len(obj))
        out = kind(_decode(x, state, _depth + 1) for x in obj)
    elif kind is dict:
        state.spend(2 * _CONTAINER_SLOT * len(obj))
        out = {_decode(k, state, _depth + 1): _decode(v, state, _depth + 1) for k, v in obj.items()}
    elif kind is not Tagged:
        raise WireError(f"unexpected {kind.__name__} in a reply")
    else:
        out = _decode_record(obj, state)
    state.memo[key] = out
    return out


def _decode_record(obj: "Tagged", state: _Decoding) -> Any:
    tag, data = obj.kind, obj.data
    if tag == "tensor":
        try:
            state.spend(len(data[3]))
        except (TypeError, IndexError):
            raise WireError("malformed tensor record") from None
        return _decode_tensor(data)
    if tag == "ref":
        ref = state.make_ref(int(data[0]), str(data[1]))
        if len(data) > 2 and data[2] is True and hasattr(ref, "_mark_method"):
            ref._mark_method()
        return ref
    if tag == "dtype":
        import torch

        value = getattr(torch, str(data), None)
        if not isinstance(value, torch.dtype):
            raise WireError(f"unknown dtype {data!r}")
        return value
    if tag == "size":
        import torch

        return torch.Size(int(x) for x in data)
    if tag == "device":
        import torch

        return torch.device(str(data))
    if tag in ("ndarray", "npscalar"):
        import numpy as np

        dtype = np.dtype(str(data[0]))
        if dtype.hasobject:
            raise WireError("object arrays are not plain data")
        if tag == "npscalar":
            return np.frombuffer(data[1], dtype=dtype)[0]
        state.spend(len(data[2]))
        return np.frombuffer(bytearray(data[2]), dtype=dtype).reshape(tuple(int(s) for s in data[1]))
    raise WireError(f"unknown record kind {tag!r}")


# ------------------------------------------------------------- digests


def digest(value: Any) -> str:
    """sha256 of plain data, stable across processes: tensors by bytes, dtype
    and shape; references by type name (what they are, not where)."""
    h = hashlib.sha256()
    _feed(h, value, 0)
    return h.hexdigest()


def _feed(h, value: Any, depth: int) -> None:
    kind = type(value)
    if depth > _MAX_DEPTH:
        h.update(b"<deep>")
        return
    if kind in (list, tuple):
        h.update(f"{kind.__name__}[{len(value)}](".encode())
        for x in value:
            _feed(h, x, depth + 1)
        h.update(b")")
        return
    if kind in (set, frozenset):
        h.update(f"{kind.__name__}{{".encode())
        for part in sorted(digest(x) for x in value):
            h.update(part.encode())
        h.update(b"}")
        return
    if kind is dict:
        h.update(b"dict{")
        for part in sorted(digest(k) + digest(v) for k, v in value.items()):
            h.update(part.encode())
        h.update(b"}")
        return
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"tensor:{t.dtype}:{tuple(t.shape)}:".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        return
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.ndarray, np.generic)):
        arr = np.ascontiguousarray(value)
        h.update(f"ndarray:{arr.dtype.str}:{arr.shape}:".encode() + arr.tobytes())
        return
    ref_type = getattr(type(value), "_roadmap_proxy_type", None)
    if ref_type is not None:
        h.update(f"ref:{ref_type(value)}".encode())
        return
    h.update(f"{kind.__name__}:{value!r}".encode() if kind in PLAIN_SCALARS else f"{kind.__qualname__}:?".encode())
