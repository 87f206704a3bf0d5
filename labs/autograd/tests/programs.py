"""Random programs as plain data (so both processes can replay them) and their
torch replays (the oracle), plus failure-message helpers."""

from __future__ import annotations

import random

import numpy as np
import torch

from roadmap_cli import grading_kit as kit


def rng(name: str) -> random.Random:
    return random.Random(kit.seeded(name))


# ---------------------------------------------------------------- scalar expression graphs

UNARY = ("exp", "log", "tanh", "relu", "neg")
BINARY = ("add", "mul", "sub", "div")
CONST = ("radd", "rsub", "rmul", "rdiv", "pow")


def scalar_program(r: random.Random, n_leaves: int, n_ops: int) -> dict:
    """A random DAG: every op reads earlier nodes (so sub-expressions are shared
    freely). Values are kept in a safe range for log/div/pow by construction:
    log and fractional powers read a node made positive first (exp of it)."""
    leaves = [r.uniform(-2, 2) for _ in range(n_leaves)]
    ops: list[list] = []
    values = list(leaves)

    def add(op, a, b, value):
        ops.append([op, a, b])
        values.append(value)

    while len(ops) < n_ops:
        kind = r.random()
        a = r.randrange(len(values))
        x = values[a]
        if kind < 0.35:
            b = r.randrange(len(values))
            op = r.choice(BINARY)
            if op == "div" and abs(values[b]) < 0.2:
                op = "mul"
            y = {"add": x + values[b], "mul": x * values[b], "sub": x - values[b], "div": x / values[b] if op == "div" else 0}[op]
            if abs(y) < 50:
                add(op, a, b, y)
        elif kind < 0.65:
            op = r.choice(UNARY)
            if op == "log":
                if x <= 0.05:
                    continue
                y = float(np.log(x))
            elif op == "exp":
                if x > 3:
                    continue
                y = float(np.exp(x))
            else:
                y = {"tanh": float(np.tanh(x)), "relu": max(x, 0.0), "neg": -x}[op]
            add(op, a, None, y)
        else:
            op = r.choice(CONST)
            c = r.choice([2.0, -1.5, 0.5, 3.0, r.uniform(-2, 2)])
            if op == "pow":
                c = r.choice([2, 3, -1, 0.5, 1.5])
                if (c < 1 and x <= 0.05) or (not float(c).is_integer() and x <= 0.05) or abs(x) < 0.05:
                    continue
                y = x ** c
            elif op == "rdiv":
                if abs(x) < 0.2:
                    continue
                y = c / x
            else:
                y = {"radd": c + x, "rsub": c - x, "rmul": c * x}[op]
            if abs(y) < 50:
                add(op, a, c, y)
    # Make the output depend on many nodes (and use some nodes twice): sum a few of them into the last.
    acc = len(values) - 1
    for b in r.sample(range(len(values)), min(4, len(values))):
        add("add", acc, b, values[acc] + values[b])
        acc = len(values) - 1
    return {"leaves": leaves, "ops": ops}


def torch_scalar(program: dict) -> dict:
    leaves = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in program["leaves"]]
    nodes = list(leaves)
    for op, a, b in program["ops"]:
        x = nodes[a]
        y = {
            "add": lambda: x + nodes[b], "mul": lambda: x * nodes[b], "sub": lambda: x - nodes[b],
            "div": lambda: x / nodes[b], "radd": lambda: b + x, "rsub": lambda: b - x, "rmul": lambda: b * x,
            "rdiv": lambda: b / x, "pow": lambda: x ** b, "neg": lambda: -x, "exp": lambda: x.exp(),
            "log": lambda: x.log(), "tanh": lambda: x.tanh(), "relu": lambda: x.relu(),
        }[op]()
        nodes.append(y)
    grads = torch.autograd.grad(nodes[-1], leaves, allow_unused=True)
    return {"data": [float(n) for n in nodes], "grads": [0.0 if g is None else float(g) for g in grads]}


def close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(b))


# ---------------------------------------------------------------- tensor programs (broadcasting)

def tensor_program(r: random.Random) -> dict:
    """Leaves with broadcast-compatible shapes ((n, m), (m,), (1, m), (n, 1), scalars),
    combined by add/mul/sub, a matmul, reductions over axes, relu, log_softmax."""
    n, m, k = r.randint(2, 5), r.randint(2, 5), r.randint(2, 4)
    shapes = [(n, m), (m,), (1, m), (n, 1), (), (n, m)]
    leaves = [np.asarray(r.choice([1.0, -1.0]) * np.random.default_rng(r.randrange(2**32)).uniform(-1.5, 1.5, s))
              for s in shapes]
    leaves.append(np.random.default_rng(r.randrange(2**32)).uniform(-1, 1, (m, k)))
    requires = [True, True, True, r.random() < 0.7, True, False, True]
    ops: list[list] = []
    cur = 0
    for _ in range(r.randint(3, 7)):
        op = r.choice(["add", "mul", "sub", "relu", "scale"])
        if op in ("add", "mul", "sub"):
            ops.append([op, cur, r.randrange(6)])
        elif op == "relu":
            ops.append(["relu", cur, None])
        else:
            ops.append(["scale", cur, r.uniform(-2, 2)])
        cur = len(shapes) + 1 + len(ops) - 1
    tail = r.random()
    if tail < 0.35:
        ops.append(["matmul", cur, len(shapes)])
        cur = len(shapes) + 1 + len(ops) - 1
        ops.append(["log_softmax", cur, r.choice([0, 1, -1])])
    elif tail < 0.7:
        ops.append([r.choice(["sum", "mean"]), cur, {"axis": r.choice([0, 1, None]), "keepdims": r.random() < 0.5}])
    else:
        ops.append(["cross_entropy", cur, [r.randrange(m) for _ in range(n)]])
    return {"leaves": [a.tolist() for a in leaves], "requires_grad": requires, "ops": ops}


def torch_tensor(program: dict) -> dict:
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=rg)
              for a, rg in zip(program["leaves"], program["requires_grad"])]
    nodes = list(leaves)
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
        elif op in ("sum", "mean"):
            f = torch.sum if op == "sum" else torch.mean
            y = f(x) if b["axis"] is None else f(x, dim=b["axis"], keepdim=b["keepdims"])
            if b["axis"] is None and b["keepdims"]:
                y = y.reshape([1] * x.dim())
        elif op == "relu":
            y = x.relu()
        elif op == "log_softmax":
            y = torch.log_softmax(x, dim=b)
        elif op == "cross_entropy":
            y = torch.nn.functional.cross_entropy(x, torch.tensor(b))
        elif op == "scale":
            y = x * b
        nodes.append(y)
    shapes = [list(n.shape) for n in nodes]
    out = nodes[-1]
    if out.numel() != 1:
        out = out.sum()
    out = out.reshape(())
    wanted = [leaf for leaf in leaves if leaf.requires_grad]
    grads = dict(zip(map(id, wanted), torch.autograd.grad(out, wanted, allow_unused=True)))
    result = []
    for leaf in leaves:
        g = grads.get(id(leaf)) if leaf.requires_grad else None
        result.append(None if g is None and not leaf.requires_grad else
                      (np.zeros(tuple(leaf.shape)) if g is None else g.numpy()))
    return {"out": float(out), "grads": result, "shapes": shapes}
