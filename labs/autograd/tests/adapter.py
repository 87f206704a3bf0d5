"""The only door from the grader to the learner's code (workspace modules
scalar, tensor, functions, strided, modules). Each function runs in the
learner's process under the sandbox, replays a program described as plain
data on the learner's engine, and returns plain results; the tests replay the
same program on torch and compare."""

from __future__ import annotations

import contextlib
import sys

from roadmap_cli import grading_kit as kit

learner_side = kit.learner_side

sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))  # the default: a 10,000-node chain must not need more


def _module(name: str):
    return kit.learner_module(name)


_AUTOGRAD_REFUSED = [False]  # True while a part 1-2 call runs
_GATED = [False]


def _gate_torch_autograd() -> None:
    """In the learner process, before any learner module is imported (the adapter is preloaded first):
    torch.autograd.backward/grad and Tensor.backward become gates that refuse while a part 1-2 call runs.
    A learner module that saves torch.autograd.grad at import saves the gate, not torch's function (red team,
    issue 35: P1b). Part 3's own torch.autograd.grad calls pass through (the gate is open then)."""
    import torch

    _GATED[0] = True

    def gate(original):
        def gated(*args, **kwargs):
            if _AUTOGRAD_REFUSED[0]:
                raise kit.ForbiddenOpError("torch.autograd is not allowed in parts 1-2: your engine computes the gradients")
            return original(*args, **kwargs)

        gated.__name__, gated.__qualname__, gated.__doc__ = original.__name__, original.__qualname__, original.__doc__
        return gated

    for owner, name in ((torch.autograd, "backward"), (torch.autograd, "grad"), (torch.Tensor, "backward")):
        setattr(owner, name, gate(getattr(owner, name)))


if kit.sandbox.in_learner_process():
    _gate_torch_autograd()


@contextlib.contextmanager
def _no_torch_autograd():
    """Parts 1-2 are your own autograd: torch's may not do the work (the gates above refuse while this is on)."""
    if not _GATED[0]:  # tests run by hand, without the learner process
        _gate_torch_autograd()
    _AUTOGRAD_REFUSED[0] = True
    try:
        yield
    finally:
        _AUTOGRAD_REFUSED[0] = False


# ---------------------------------------------------------------- part 1: scalar engine

def _replay_scalar(Value, program):
    nodes = [Value(x) for x in program["leaves"]]
    for op, a, b in program["ops"]:
        x = nodes[a]
        if op == "add":
            y = x + nodes[b]
        elif op == "mul":
            y = x * nodes[b]
        elif op == "sub":
            y = x - nodes[b]
        elif op == "div":
            y = x / nodes[b]
        elif op == "radd":
            y = b + x
        elif op == "rsub":
            y = b - x
        elif op == "rmul":
            y = b * x
        elif op == "rdiv":
            y = b / x
        elif op == "pow":
            y = x ** b
        elif op == "neg":
            y = -x
        else:
            y = getattr(x, op)()
        nodes.append(y)
    return nodes


@learner_side
def scalar_program(program, backward_twice: bool = False) -> dict:
    """Build the graph, backward from the last node; return every node's data
    and every leaf's grad. With backward_twice, zero_grad() and backward again."""
    Value = _module("scalar").Value
    with _no_torch_autograd():
        nodes = _replay_scalar(Value, program)
        out = nodes[-1]
        out.backward()
        if backward_twice:
            out.zero_grad()
            out.backward()
    n_leaves = len(program["leaves"])
    return {"data": [float(n.data) for n in nodes], "grads": [float(n.grad) for n in nodes[:n_leaves]]}


@learner_side
def scalar_accumulates(x0: float) -> list:
    """Two backward passes without zero_grad: grads must add up (torch does the same)."""
    Value = _module("scalar").Value
    with _no_torch_autograd():
        x = Value(x0)
        y = x * x + x
        y.backward()
        first = x.grad
        y.backward()
    return [float(first), float(x.grad)]


@learner_side
def scalar_chain(length: int, x0: float) -> dict:
    """x -> tanh(x) * 0.5 + 0.1 -> ... `length` times: no recursion error allowed."""
    Value = _module("scalar").Value
    with _no_torch_autograd():
        x = Value(x0)
        y = x
        for _ in range(length):
            y = y.tanh() * 0.5 + 0.1
        y.backward()
    return {"data": float(y.data), "grad": float(x.grad)}


@learner_side
def scalar_order(program) -> list:
    """Positions of each node in the learner's topological order (leaves first, output last)."""
    Value = _module("scalar").Value
    nodes = _replay_scalar(Value, program)
    order = nodes[-1].topological_order()
    where = {id(n): i for i, n in enumerate(order)}
    return {"positions": [where.get(id(n), -1) for n in nodes], "unique": len(where) == len(order)}


# ---------------------------------------------------------------- part 2: tensor engine

@learner_side
def tensor_program(program) -> dict:
    """ops over numpy arrays: returns the output value and every leaf's grad."""
    import numpy as np

    T = _module("tensor").Tensor
    with _no_torch_autograd():
        nodes = [T(np.array(a), requires_grad=rg) for a, rg in zip(program["leaves"], program["requires_grad"])]
        for op, a, b in program["ops"]:
            x = nodes[a]
            if op == "add":
                y = x + nodes[b]
            elif op == "mul":
                y = x * nodes[b]
            elif op == "sub":
                y = x - nodes[b]
            elif op == "matmul":
                y = x @ nodes[b]
            elif op == "sum":
                y = x.sum(axis=b["axis"], keepdims=b["keepdims"])
            elif op == "mean":
                y = x.mean(axis=b["axis"], keepdims=b["keepdims"])
            elif op == "relu":
                y = x.relu()
            elif op == "log_softmax":
                y = x.log_softmax(axis=b)
            elif op == "cross_entropy":
                y = x.cross_entropy(b)
            elif op == "scale":
                y = x * b
            else:
                raise ValueError(op)
            nodes.append(y)
        out = nodes[-1]
        if out.data.size != 1:
            out = out.sum()
        out.backward()
    return {"out": float(np.asarray(out.data).item()), "grads": [None if n.grad is None else np.asarray(n.grad, dtype=np.float64)
                                              for n in nodes[:len(program["leaves"])]],
            "shapes": [list(np.shape(n.data)) for n in nodes]}


@learner_side
def unbroadcast(grad, shape) -> object:
    import numpy as np

    return np.asarray(_module("tensor").unbroadcast(np.asarray(grad), tuple(shape)), dtype=np.float64)


@learner_side
def mlp_losses(x, y, w1, b1, w2, b2, lr: float, steps: int) -> dict:
    import numpy as np

    originals = [np.array(a, copy=True) for a in (w1, b1, w2, b2)]
    with _no_torch_autograd():
        losses = _module("tensor").mlp_training_losses(x, y, w1, b1, w2, b2, lr, steps)
    untouched = all(np.array_equal(o, a) for o, a in zip(originals, (w1, b1, w2, b2)))
    return {"losses": [float(v) for v in losses], "inputs_unchanged": untouched}


# ---------------------------------------------------------------- part 3: autograd.Function

@learner_side
def fused_cross_entropy(logits, targets, reduction, ignore_index, grad_out, direction) -> dict:
    """Loss, d loss/d logits (for grad_out), and the Hessian-vector product along
    `direction` (double backward) of the learner's op, plus what it saved."""
    import torch

    fn = _module("functions")
    x = logits.detach().clone().requires_grad_(True)
    kwargs = {}
    if reduction is not None:
        kwargs["reduction"] = reduction
    if ignore_index is not None:
        kwargs["ignore_index"] = ignore_index
    loss = fn.softmax_cross_entropy(x, targets, **kwargs)
    saved = list(loss.grad_fn.saved_tensors) if loss.grad_fn is not None else []
    facts = {
        "uses_custom_function": isinstance(loss.grad_fn, torch.autograd.function.BackwardCFunction),
        "saved_count": len(saved),
        "saved_is_inputs": len(saved) == 2 and torch.equal(saved[0], x.detach()) and torch.equal(saved[1], targets),
    }
    (grad,) = torch.autograd.grad(loss, x, grad_outputs=grad_out, create_graph=True)
    (hvp,) = torch.autograd.grad((grad * direction).sum(), x)
    return {"loss": loss.detach(), "grad": grad.detach(), "hvp": hvp.detach(), **facts}


@learner_side
def fused_cross_entropy_rejects(logits, targets, reduction) -> str:
    try:
        _module("functions").softmax_cross_entropy(logits, targets, reduction=reduction)
    except ValueError:
        return "ValueError"
    except NotImplementedError:
        raise  # not written yet: reported as such, not as the wrong exception
    except Exception as exc:  # noqa: BLE001 - report what it raised
        return type(exc).__name__
    return "nothing"


# ---------------------------------------------------------------- part 4: strided tensors

@learner_side
def strided_replay(shape, steps) -> list:
    """Apply `steps` to StridedTensor.from_list(range(n), shape); after each,
    report shape, stride, offset, contiguity, shares-storage-with-base, values,
    or the exception type when the step raised (and stop)."""
    S = _module("strided").StridedTensor
    n = 1
    for s in shape:
        n *= s
    base = S.from_list([float(i) for i in range(n)], tuple(shape))
    t = base
    facts = []
    for step in steps:
        kind, arg = step
        try:
            if kind == "transpose":
                t = t.transpose(*arg)
            elif kind == "permute":
                t = t.permute(*arg)
            elif kind == "index":
                t = t[tuple(slice(*a) if isinstance(a, list) else a for a in arg)]
            elif kind == "view":
                t = t.view(*arg)
            elif kind == "contiguous":
                t = t.contiguous()
        except NotImplementedError:
            raise  # an unwritten method is not a refusal: the grade says "not implemented yet"
        except (RuntimeError, IndexError, ValueError) as exc:
            facts.append({"raised": type(exc).__name__})
            break
        facts.append({"shape": list(t.shape), "stride": list(t.stride), "offset": int(t.data_ptr()),
                      "contiguous": bool(t.is_contiguous()), "shares": bool(t.shares_storage(base)),
                      "values": t.tolist()})
    return facts


# ---------------------------------------------------------------- part 5: nn.Linear / nn.MultiheadAttention

@contextlib.contextmanager
def _no_torch_modules():
    import torch
    import torch.nn.functional as F

    def refuse(*args, **kwargs):
        raise kit.ForbiddenOpError("write it yourself: F.multi_head_attention_forward and nn.MultiheadAttention "
                                   "are not allowed in part 5")

    saved = [(F, "multi_head_attention_forward", F.multi_head_attention_forward),
             (torch.nn.MultiheadAttention, "forward", torch.nn.MultiheadAttention.forward)]
    for owner, name, _ in saved:
        setattr(owner, name, refuse)
    try:
        with kit.forbid_torch_ops("linear", "sdpa"):
            yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@learner_side
def linear_init(seed: int, in_features: int, out_features: int, bias: bool) -> dict:
    import torch

    torch.manual_seed(seed)
    layer = _module("modules").Linear(in_features, out_features, bias=bias)
    return {name: p.detach().clone() for name, p in layer.state_dict().items()}


@learner_side
def linear_forward(state, in_features: int, out_features: int, bias: bool, x) -> dict:
    import torch

    layer = _module("modules").Linear(in_features, out_features, bias=bias).double()
    layer.load_state_dict(state, strict=True)
    x = x.detach().clone().requires_grad_(True)
    with _no_torch_modules():
        y = layer(x)
    (gx,) = torch.autograd.grad(y.sum(), x)
    return {"y": y.detach(), "grad_x": gx, "names": sorted(layer.state_dict())}


@learner_side
def mha_forward(state, embed_dim: int, num_heads: int, batch_first: bool, query, key, value, options) -> dict:
    mha = _module("modules").MultiheadAttention(embed_dim, num_heads, batch_first=batch_first).double()
    mha.load_state_dict(state, strict=True)
    with _no_torch_modules():
        out, weights = mha(query, key, value, **options)
    return {"out": out.detach(), "weights": None if weights is None else weights.detach(),
            "names": sorted(mha.state_dict())}
