"""Part 2 — a tensor autograd engine with broadcasting (numpy, float64).

The same idea as part 1, one level up: a node holds an n-dimensional array and
its backward receives d(loss)/d(out) of the SAME shape as out. The new thing is
broadcasting (README.md, "Part 2: tensors and broadcasting"): `a + b` with a
(4, 3) and b (3,) adds b to every row, so in backward b's gradient is the SUM
over the rows it was copied to. `unbroadcast(grad, shape)` undoes it: sum over
the leading axes that broadcasting added, and over every axis where `shape`
has size 1 (keeping that axis).

No torch here: numpy does the arithmetic, you do the calculus.
"""

from __future__ import annotations

import numpy as np


def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `grad` down to `shape` (the inverse of numpy broadcasting)."""
    raise NotImplementedError("unbroadcast: see README.md, section \"Part 2: tensors and broadcasting\"")


class Tensor:
    """An ndarray (float64) that records how it was computed."""

    def __init__(self, data, _parents: tuple = (), requires_grad: bool = False) -> None:
        self.data = np.array(data, dtype=np.float64)
        self.grad: np.ndarray | None = None
        self.requires_grad = requires_grad or any(p.requires_grad for p in _parents)
        self._parents = _parents
        self._backward = lambda: None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, requires_grad={self.requires_grad})"

    @staticmethod
    def _lift(other) -> "Tensor":
        return other if isinstance(other, Tensor) else Tensor(other)

    def _accumulate(self, grad: np.ndarray) -> None:
        if not self.requires_grad:
            return
        grad = unbroadcast(grad, self.shape)
        self.grad = grad.copy() if self.grad is None else self.grad + grad

    # ------------------------------------------------------------ operations
    def __add__(self, other) -> "Tensor":
        other = self._lift(other)
        out = Tensor(self.data + other.data, (self, other))

        def _backward() -> None:
            raise NotImplementedError("__add__: see README.md, section \"Part 2: tensors and broadcasting\"")

        out._backward = _backward
        return out

    def __mul__(self, other) -> "Tensor":
        other = self._lift(other)
        out = Tensor(self.data * other.data, (self, other))

        def _backward() -> None:
            raise NotImplementedError("__mul__: see README.md, section \"Part 2: tensors and broadcasting\"")

        out._backward = _backward
        return out

    def __neg__(self) -> "Tensor":
        return self * -1.0

    def __sub__(self, other) -> "Tensor":
        return self + (-self._lift(other))

    __radd__ = __add__
    __rmul__ = __mul__

    def __matmul__(self, other) -> "Tensor":
        """(n, k) @ (k, m) -> (n, m): 2-D only."""
        other = self._lift(other)
        if self.data.ndim != 2 or other.data.ndim != 2:
            raise ValueError("matmul takes two 2-D tensors")
        out = Tensor(self.data @ other.data, (self, other))

        def _backward() -> None:
            raise NotImplementedError("__matmul__: see README.md, section \"Part 2: tensors and broadcasting\"")

        out._backward = _backward
        return out

    def sum(self, axis: int | None = None, keepdims: bool = False) -> "Tensor":
        out = Tensor(self.data.sum(axis=axis, keepdims=keepdims), (self,))

        def _backward() -> None:
            raise NotImplementedError("sum: see README.md, section \"Part 2: tensors and broadcasting\"")

        out._backward = _backward
        return out

    def mean(self, axis: int | None = None, keepdims: bool = False) -> "Tensor":
        count = self.data.size if axis is None else self.data.shape[axis]
        return self.sum(axis=axis, keepdims=keepdims) * (1.0 / count)

    def relu(self) -> "Tensor":
        out = Tensor(np.maximum(self.data, 0.0), (self,))

        def _backward() -> None:
            raise NotImplementedError("relu: see README.md, section \"Part 2: tensors and broadcasting\"")

        out._backward = _backward
        return out

    def log_softmax(self, axis: int = -1) -> "Tensor":
        """x - logsumexp(x), computed stably: subtract the max first."""
        raise NotImplementedError("log_softmax: see README.md, section \"Part 2: tensors and broadcasting\"")

        def _backward() -> None:
            raise NotImplementedError("log_softmax: see README.md, section \"Part 2: tensors and broadcasting\"")

        out._backward = _backward
        return out

    def cross_entropy(self, targets) -> "Tensor":
        """Mean over rows of -log_softmax(self)[row, targets[row]]; self is (n, classes)."""
        targets = np.asarray(targets, dtype=np.int64)
        n = self.shape[0]
        onehot = np.zeros(self.shape)
        onehot[np.arange(n), targets] = 1.0
        return (self.log_softmax(axis=1) * onehot).sum() * (-1.0 / n)

    # ------------------------------------------------------------ backward
    def backward(self) -> None:
        """Gradients of this SCALAR into every tensor that requires them."""
        if self.data.size != 1:
            raise ValueError("backward() needs a scalar (call .sum() first)")
        raise NotImplementedError("backward: see README.md, section \"Part 2: tensors and broadcasting\"")


def mlp_training_losses(x, y, w1, b1, w2, b2, lr: float, steps: int) -> list[float]:
    """Train a 2-layer MLP, logits = relu(x @ w1 + b1) @ w2 + b2, with plain
    SGD on cross-entropy for `steps` steps from the given weights (numpy
    arrays, not modified); return the loss BEFORE each step."""
    raise NotImplementedError("mlp_training_losses: see README.md, section \"Part 2: tensors and broadcasting\"")
