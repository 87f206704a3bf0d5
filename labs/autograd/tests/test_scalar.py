"""Part 1: the scalar engine against torch.autograd in float64, to 1e-9, on
random expression DAGs with shared sub-expressions, reversed operands, a
10,000-node chain, accumulation across backward passes and zero_grad."""

from __future__ import annotations

import pytest

import adapter
import programs

SECTION = "Part 1: scalar autograd"
TOL = 1e-9


def _compare(program: dict, got: dict, want: dict, label: str) -> None:
    for i, (g, w) in enumerate(zip(got["data"], want["data"])):
        if not programs.close(g, w, TOL):
            op = program["ops"][i - len(program["leaves"])] if i >= len(program["leaves"]) else "leaf"
            raise AssertionError(f"{label}: node {i} ({op}) has data {g!r}, torch says {w!r} (README.md, section \"{SECTION}\")")
    for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
        if not programs.close(g, w, TOL):
            raise AssertionError(f"{label}: leaf {i} has grad {g!r}, torch says {w!r}: check the backward of the "
                                 f"ops it feeds, and that a node used twice gets the SUM of both paths "
                                 f"(README.md, section \"{SECTION}\")")


# One test per operation, so each derivative rule in lab.yaml names the test that proves it.
@pytest.mark.parametrize("op", programs.UNARY + programs.BINARY + programs.CONST)
def test_each_operation_alone(op):
    r = programs.rng(f"scalar-each-op-{op}")
    x, y = r.uniform(0.3, 2.0), r.uniform(0.3, 2.0)
    if op in programs.UNARY:
        ops = [[op, 0, None]]
    elif op in programs.BINARY:
        ops = [[op, 0, 1]]
    else:
        ops = [[op, 0, r.choice([2.5, -1.25, 3]) if op != "pow" else r.choice([3, -2, 0.5])]]
    program = {"leaves": [x, y], "ops": ops}
    _compare(program, adapter.scalar_program(program), programs.torch_scalar(program), f"{op}({x:.3f}, {y:.3f})")


def test_relu_at_and_below_zero():
    for x in (-1.5, 0.0, 2.0):
        # times a constant: relu(x) * x would hide relu'(0) (its gradient at 0 is 0 whatever relu'(0) is)
        program = {"leaves": [x], "ops": [["relu", 0, None], ["rmul", 1, 3.0]]}
        _compare(program, adapter.scalar_program(program), programs.torch_scalar(program), f"relu at {x}")


def test_node_used_twice_sums_both_paths():
    # a = x * y; b = a + a; c = b * a  -> every path through a counts
    program = {"leaves": [1.5, -0.7], "ops": [["mul", 0, 1], ["add", 2, 2], ["mul", 3, 2], ["add", 4, 0]]}
    _compare(program, adapter.scalar_program(program), programs.torch_scalar(program), "x*y used three times")


def test_random_graphs():
    r = programs.rng("scalar-random")
    for trial in range(60):
        program = programs.scalar_program(r, r.randint(1, 5), r.randint(3, 40))
        _compare(program, adapter.scalar_program(program), programs.torch_scalar(program), f"random graph #{trial}")


def test_backward_twice_with_zero_grad():
    r = programs.rng("scalar-twice")
    program = programs.scalar_program(r, 3, 20)
    _compare(program, adapter.scalar_program(program, backward_twice=True), programs.torch_scalar(program),
             "zero_grad() then backward() again")


def test_gradients_accumulate_without_zero_grad():
    first, second = adapter.scalar_accumulates(0.75)
    want = 2 * 0.75 + 1
    assert programs.close(first, want, TOL) and programs.close(second, 2 * want, TOL), (
        f"d(x*x + x)/dx at 0.75 after one backward = {first!r} (expected {want!r}), after a second backward without "
        f"zero_grad = {second!r} (expected {2 * want!r}: gradients accumulate, like torch) "
        f"(README.md, section \"{SECTION}\")")


def test_ten_thousand_node_chain():
    import torch

    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y.tanh() * 0.5 + 0.1
    (g,) = torch.autograd.grad(y, x)
    got = adapter.scalar_chain(10_000, 0.3)
    assert programs.close(got["data"], float(y), TOL) and programs.close(got["grad"], float(g), TOL), (
        f"a 10,000-step chain: data {got['data']!r} grad {got['grad']!r}, torch says {float(y)!r} and {float(g)!r} "
        f"(README.md, section \"{SECTION}\")")


def test_topological_order():
    r = programs.rng("scalar-topo")
    for _ in range(10):
        program = programs.scalar_program(r, 3, 25)
        facts = adapter.scalar_order(program)
        where = facts["positions"]
        assert facts["unique"], f"topological_order() lists a node more than once (README.md, section \"{SECTION}\")"
        assert where[-1] == max(where), f"the output must come last in topological_order() (README.md, section \"{SECTION}\")"
        for i, (op, a, b) in enumerate(program["ops"]):
            node = len(program["leaves"]) + i
            if where[node] < 0:
                continue  # not reachable from the output
            for parent in ([a] + ([b] if op in programs.BINARY else [])):
                assert 0 <= where[parent] < where[node], (
                    f"node {node} ({op}) comes at position {where[node]}, before its input {parent} "
                    f"(position {where[parent]}) (README.md, section \"{SECTION}\")")
