"""Part 1 — a scalar autograd engine (micrograd-sized, exact to 1e-9).

Every `Value` remembers the values it was computed from (`_parents`) and how
to push a gradient back to them (`_backward`). `backward()` orders the graph
topologically and applies the chain rule once per node, from the output back
to the leaves: d(out)/d(parent) += d(out)/d(node) * d(node)/d(parent).

Two details decide whether it is right (README.md, "Part 1: scalar autograd"):
- a node used twice receives the SUM of both paths (`+=`, never `=`);
- the topological order is built WITHOUT recursion: a 10,000-node chain must
  not hit Python's recursion limit.
"""

from __future__ import annotations

import math


class Value:
    """A scalar that records how it was computed. `data` is a float, `grad`
    is d(output)/d(self) after `output.backward()` (0.0 before)."""

    def __init__(self, data: float, _parents: tuple = (), _op: str = "") -> None:
        self.data = float(data)
        self.grad = 0.0
        self._parents = _parents
        self._op = _op
        self._backward = lambda: None

    def __repr__(self) -> str:
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    @staticmethod
    def _lift(other) -> "Value":
        return other if isinstance(other, Value) else Value(other)

    # ------------------------------------------------------------ operations
    def __add__(self, other) -> "Value":
        other = self._lift(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward() -> None:
            raise NotImplementedError("__add__: see README.md, section \"Part 1: scalar autograd\"")

        out._backward = _backward
        return out

    def __mul__(self, other) -> "Value":
        other = self._lift(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward() -> None:
            raise NotImplementedError("__mul__: see README.md, section \"Part 1: scalar autograd\"")

        out._backward = _backward
        return out

    def __pow__(self, exponent: float) -> "Value":
        """self ** exponent for a constant (int or float) exponent."""
        if isinstance(exponent, Value):
            raise TypeError("only constant exponents are supported: use exp/log for x ** y")
        out = Value(self.data ** exponent, (self,), f"**{exponent}")

        def _backward() -> None:
            raise NotImplementedError("__pow__: see README.md, section \"Part 1: scalar autograd\"")

        out._backward = _backward
        return out

    def exp(self) -> "Value":
        out = Value(math.exp(self.data), (self,), "exp")

        def _backward() -> None:
            raise NotImplementedError("exp: see README.md, section \"Part 1: scalar autograd\"")

        out._backward = _backward
        return out

    def log(self) -> "Value":
        out = Value(math.log(self.data), (self,), "log")

        def _backward() -> None:
            raise NotImplementedError("log: see README.md, section \"Part 1: scalar autograd\"")

        out._backward = _backward
        return out

    def tanh(self) -> "Value":
        out = Value(math.tanh(self.data), (self,), "tanh")

        def _backward() -> None:
            raise NotImplementedError("tanh: see README.md, section \"Part 1: scalar autograd\"")

        out._backward = _backward
        return out

    def relu(self) -> "Value":
        out = Value(self.data if self.data > 0 else 0.0, (self,), "relu")

        def _backward() -> None:
            raise NotImplementedError("relu: see README.md, section \"Part 1: scalar autograd\"")

        out._backward = _backward
        return out

    # Everything else is built from the operations above (so it needs no backward of its own).
    def __neg__(self) -> "Value":
        return self * -1.0

    def __sub__(self, other) -> "Value":
        return self + (-self._lift(other))

    def __truediv__(self, other) -> "Value":
        return self * self._lift(other) ** -1

    def __radd__(self, other) -> "Value":
        return self + other

    def __rmul__(self, other) -> "Value":
        return self * other

    def __rsub__(self, other) -> "Value":
        return self._lift(other) - self

    def __rtruediv__(self, other) -> "Value":
        return self._lift(other) / self

    # ------------------------------------------------------------ backward
    def topological_order(self) -> list["Value"]:
        """Every node reachable from self, each after all of its parents
        (leaves first, self last), built with an explicit stack."""
        raise NotImplementedError("topological_order: see README.md, section \"Part 1: scalar autograd\"")

    def backward(self) -> None:
        """d(self)/d(node) into node.grad for every node of the graph.

        Like torch: the leaves' gradients accumulate across backward passes
        (call zero_grad() between two), while every intermediate node starts
        from 0 in each pass (torch does not even keep them)."""
        raise NotImplementedError("backward: see README.md, section \"Part 1: scalar autograd\"")

    def zero_grad(self) -> None:
        for node in self.topological_order():
            node.grad = 0.0
