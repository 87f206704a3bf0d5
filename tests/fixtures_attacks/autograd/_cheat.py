"""Route P1b: autograd's Part 1 rule ("torch.autograd is not allowed in parts 1-2: your engine computes the
gradients") is enforced by adapter._no_torch_autograd() inside the learner's own process. torch.autograd.grad
taken at import time (before the guard patches the module attribute) still works: the learner's Value becomes a
thin wrapper over torch scalars; no backward rule, no topological sort written."""
import itertools
import sys

import torch

_grad = torch.autograd.grad  # before any guard
_ids = itertools.count()


class TValue:
    def __init__(self, data, _t=None, _parents=()):
        self.t = _t if _t is not None else torch.tensor(float(data), dtype=torch.float64, requires_grad=True)
        self.parents, self.order, self.grad = tuple(_parents), next(_ids), 0.0

    data = property(lambda self: float(self.t))

    def _wrap(self, t, *ps):
        return TValue(None, t, ps)

    def _o(self, other):
        return other if isinstance(other, TValue) else TValue(None, torch.tensor(float(other), dtype=torch.float64))

    def __add__(self, o): o = self._o(o); return self._wrap(self.t + o.t, self, o)
    def __mul__(self, o): o = self._o(o); return self._wrap(self.t * o.t, self, o)
    def __sub__(self, o): o = self._o(o); return self._wrap(self.t - o.t, self, o)
    def __truediv__(self, o): o = self._o(o); return self._wrap(self.t / o.t, self, o)
    def __radd__(self, c): return self._wrap(c + self.t, self)
    def __rsub__(self, c): return self._wrap(c - self.t, self)
    def __rmul__(self, c): return self._wrap(c * self.t, self)
    def __rtruediv__(self, c): return self._wrap(c / self.t, self)
    def __pow__(self, c): return self._wrap(self.t ** c, self)
    def __neg__(self): return self._wrap(-self.t, self)
    def exp(self): return self._wrap(self.t.exp(), self)
    def log(self): return self._wrap(self.t.log(), self)
    def tanh(self): return self._wrap(self.t.tanh(), self)
    def relu(self): return self._wrap(self.t.relu(), self)

    def topological_order(self):
        seen, stack = {}, [self]
        while stack:
            n = stack.pop()
            if id(n) not in seen:
                seen[id(n)] = n
                stack.extend(n.parents)
        return sorted(seen.values(), key=lambda n: n.order)

    def backward(self):
        nodes = [n for n in self.topological_order() if n.t.requires_grad]
        leaves = [n for n in nodes if not n.parents]
        for leaf, g in zip(leaves, _grad(self.t, [l.t for l in leaves], allow_unused=True, retain_graph=True)):
            leaf.grad += 0.0 if g is None else float(g)
        self.grad = 1.0

    def zero_grad(self):
        for n in self.topological_order():
            n.grad = 0.0


_scalar = sys.modules.get("scalar")
if _scalar is not None:
    _scalar.Value = TValue
