"""Guards that run around the learner's call (they catch accidents; a
determined learner can edit anything).

- `forbid_torch_ops(...)`: the named torch ops raise while the block runs,
  e.g. a Triton matmul lab forbids `torch.matmul` and `@`.
- `count_triton_launches()`: counts Triton kernel launches, so a test can
  require that a kernel actually ran (compiled or interpreted).
- `inputs_unchanged(...)`: the learner must not modify its inputs.
"""

from __future__ import annotations

import contextlib
from typing import Iterator


class ForbiddenOpError(RuntimeError):
    pass


# name -> (module path, attribute) pairs patched while the guard is active.
_OPS: dict[str, list[tuple[str, str]]] = {
    "matmul": [
        ("torch", "matmul"),
        ("torch.Tensor", "matmul"),
        ("torch.Tensor", "__matmul__"),
        ("torch.Tensor", "__rmatmul__"),
    ],
    "mm": [("torch", "mm"), ("torch.Tensor", "mm"), ("torch", "addmm"), ("torch.Tensor", "addmm")],
    "bmm": [("torch", "bmm"), ("torch.Tensor", "bmm"), ("torch", "baddbmm"), ("torch.Tensor", "baddbmm")],
    "einsum": [("torch", "einsum")],
    "linear": [("torch.nn.functional", "linear")],
    "softmax": [
        ("torch", "softmax"),
        ("torch.Tensor", "softmax"),
        ("torch.nn.functional", "softmax"),
        ("torch", "log_softmax"),
        ("torch.Tensor", "log_softmax"),
        ("torch.nn.functional", "log_softmax"),
    ],
    "sdpa": [("torch.nn.functional", "scaled_dot_product_attention")],
}


def _resolve(path: str):
    import importlib

    if path == "torch.Tensor":
        import torch

        return torch.Tensor
    return importlib.import_module(path)


@contextlib.contextmanager
def forbid_torch_ops(*names: str) -> Iterator[None]:
    """While active, each named op raises ForbiddenOpError. Names: see _OPS."""
    unknown = [n for n in names if n not in _OPS]
    if unknown:
        raise ValueError(f"unknown op group(s) {unknown}; known: {sorted(_OPS)}")
    saved: list[tuple[object, str, object]] = []

    def make_raiser(label: str):
        def raiser(*args, **kwargs):
            raise ForbiddenOpError(f"{label} is not allowed here: write the kernel yourself")

        return raiser

    try:
        for name in names:
            for module_path, attr in _OPS[name]:
                owner = _resolve(module_path)
                if hasattr(owner, attr):
                    saved.append((owner, attr, getattr(owner, attr)))
                    setattr(owner, attr, make_raiser(f"{module_path}.{attr}"))
        yield
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)


class LaunchCounter:
    """How many Triton launches a block made, and of which kernels (a plain
    class, not a dataclass: `dataclasses` costs ~0.1 s of import in every
    grader and learner process)."""

    def __init__(self, count: int = 0, kernels: list[str] | None = None) -> None:
        self.count = count
        self.kernels = kernels

    def __repr__(self) -> str:
        return f"LaunchCounter(count={self.count}, kernels={self.kernels})"


@contextlib.contextmanager
def count_triton_launches() -> Iterator[LaunchCounter]:
    """Count Triton kernel launches (JIT-compiled or interpreted) in the block."""
    from triton.runtime import jit

    classes = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - very old triton
        pass
    counter = LaunchCounter(kernels=[])
    originals = []
    for cls in classes:
        original = cls.run

        def run(self, *args, __original=original, **kwargs):
            if not kwargs.get("warmup", False):
                counter.count += 1
                counter.kernels.append(getattr(self, "__name__", "kernel"))
            return __original(self, *args, **kwargs)

        originals.append((cls, original))
        cls.run = run
    try:
        yield counter
    finally:
        for cls, original in originals:
            cls.run = original


@contextlib.contextmanager
def inputs_unchanged(*tensors, what: str = "input") -> Iterator[None]:
    """Fail if the block modified any of `tensors` in place."""
    clones = [t.detach().clone() for t in tensors]
    yield
    import torch

    for i, (t, c) in enumerate(zip(tensors, clones)):
        if not torch.equal(t.detach(), c):
            raise AssertionError(f"{what} #{i} was modified in place by the learner's code")
