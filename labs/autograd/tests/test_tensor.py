"""Part 2: the tensor engine against torch in float64: broadcasting add/mul/sub
whose backward un-broadcasts, matmul, sum/mean over axes with and without
keepdims, relu, a stable log_softmax, cross-entropy; then a 2-layer MLP whose
SGD loss curve must equal torch's step for step (1e-6)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import adapter
import programs

SECTION = "Part 2: tensors and broadcasting"


def _same(got, want, tol=1e-9) -> bool:
    return got.shape == want.shape and np.allclose(got, want, rtol=tol, atol=tol)


def test_unbroadcast():
    r = programs.rng("unbroadcast")
    cases = [((4, 3), (3,)), ((4, 3), (1, 3)), ((4, 3), (4, 1)), ((4, 3), ()), ((2, 4, 3), (4, 1)), ((2, 4, 3), (2, 1, 3)),
             ((5,), (1,)), ((3, 1), (3, 1))]
    for full, shape in cases:
        grad = np.random.default_rng(r.randrange(2**32)).normal(size=full)
        want = torch.tensor(grad).sum_to_size(shape).numpy() if shape else np.asarray(grad.sum())
        got = np.asarray(adapter.unbroadcast(grad, shape))
        assert _same(got, want), (f"unbroadcast(grad {full} -> {shape}) gave shape {got.shape}: {got.ravel()[:4]}..., "
                                  f"expected {want.shape}: {np.ravel(want)[:4]}... (README.md, section \"{SECTION}\")")


def _same_shapes(got, want, label):
    """Every node's output shape, not only the final value: a (4,) where torch has (4, 1) can
    give the same sum and the same gradients."""
    for i, (g, w) in enumerate(zip(got["shapes"], want["shapes"])):
        assert g == w, (f"{label}: node {i} has shape {tuple(g)}, torch's has {tuple(w)}: every op keeps "
                        f"torch's shape (mean is sum times 1/count, keepdims too) (README.md, section \"{SECTION}\")")


def test_random_broadcasting_programs():
    r = programs.rng("tensor-random")
    for trial in range(60):
        program = programs.tensor_program(r)
        got = adapter.tensor_program(program)
        want = programs.torch_tensor(program)
        _same_shapes(got, want, f"program #{trial} {program['ops']}")
        assert abs(got["out"] - want["out"]) <= 1e-9 * max(1.0, abs(want["out"])), (
            f"program #{trial} {program['ops']}: output {got['out']!r}, torch says {want['out']!r} "
            f"(README.md, section \"{SECTION}\")")
        for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
            shape = np.asarray(program["leaves"][i]).shape
            if w is None:
                assert g is None, f"program #{trial}: leaf {i} does not require grad but got a gradient"
                continue
            g = np.zeros(shape) if g is None else np.asarray(g)
            assert _same(g, np.asarray(w)), (
                f"program #{trial} {program['ops']}: grad of leaf {i} {shape} is {g.ravel()[:4]}... (shape {g.shape}), "
                f"torch says {np.ravel(w)[:4]}...: un-broadcast in backward (README.md, section \"{SECTION}\")")


# Small fixed programs, one per backward rule, so lab.yaml can name the test that proves each rule
# (the random programs above draw their ops, and a given op may be rare in one run).
A = [[0.5, -1.25, 2.0], [1.5, 0.25, -0.75], [-2.0, 1.0, 0.0], [0.75, -0.5, 1.25]]  # (4, 3); one exact 0
B = [[0.3, -0.7], [1.1, 0.4], [-0.6, 0.9]]                                          # (3, 2)
FOCUSED = {
    "add-row-broadcast": {"leaves": [A, [0.2, -0.4, 0.6]], "requires_grad": [True, True],
                          "ops": [["add", 0, 1], ["mul", 2, 2]]},                 # (3,) added to every row
    "mul-column-broadcast": {"leaves": [A, [[0.5], [-1.0], [2.0], [1.5]]], "requires_grad": [True, True],
                             "ops": [["mul", 0, 1], ["mul", 2, 2]]},               # (4, 1) times (4, 3)
    "sub-scalar-broadcast": {"leaves": [A, 0.7], "requires_grad": [True, True],
                             "ops": [["sub", 0, 1], ["mul", 2, 2]]},               # a 0-d tensor
    "matmul": {"leaves": [A, B], "requires_grad": [True, True], "ops": [["matmul", 0, 1], ["mul", 2, 2]]},
    "sum-axis1": {"leaves": [A], "requires_grad": [True],
                  "ops": [["sum", 0, {"axis": 1, "keepdims": False}], ["mul", 1, 1]]},
    "sum-axis0-keepdims": {"leaves": [A], "requires_grad": [True],
                           "ops": [["sum", 0, {"axis": 0, "keepdims": True}], ["mul", 1, 1]]},
    "mean-axis1-keepdims": {"leaves": [A], "requires_grad": [True],
                            "ops": [["mean", 0, {"axis": 1, "keepdims": True}], ["mul", 1, 1]]},
    "mean-axis0": {"leaves": [A], "requires_grad": [True],
                   "ops": [["mean", 0, {"axis": 0, "keepdims": False}], ["mul", 1, 1]]},
    "relu-at-zero": {"leaves": [A, [[1.0, -2.0, 0.5]] * 4], "requires_grad": [True, False],
                     "ops": [["relu", 0, None], ["mul", 2, 1]]},                # torch: relu'(0) = 0
    "log_softmax-axis0": {"leaves": [A, [[1.0, -2.0, 0.5]] * 4], "requires_grad": [True, False],
                          "ops": [["log_softmax", 0, 0], ["mul", 2, 1]]},
    "log_softmax-axis-1": {"leaves": [A, [[1.0, -2.0, 0.5]] * 4], "requires_grad": [True, False],
                           "ops": [["log_softmax", 0, -1], ["mul", 2, 1]]},
    # node 2 (relu of a constant) is computed from constants only: backward must skip it
    "constant-subgraph": {"leaves": [A, [[1.0, -2.0, 0.5]] * 4], "requires_grad": [True, False],
                          "ops": [["relu", 1, None], ["add", 0, 2], ["mul", 3, 3]]},
}


@pytest.mark.parametrize("name", list(FOCUSED))
def test_focused_backward(name):
    program = FOCUSED[name]
    got, want = adapter.tensor_program(program), programs.torch_tensor(program)
    _same_shapes(got, want, name)
    assert abs(got["out"] - want["out"]) <= 1e-9 * max(1.0, abs(want["out"])), (
        f"{name}: output {got['out']!r}, torch says {want['out']!r} (README.md, section \"{SECTION}\")")
    for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
        if w is None:
            assert g is None, f"{name}: leaf {i} does not require grad but got a gradient"
            continue
        assert g is not None and _same(np.asarray(g), np.asarray(w)), (
            f"{name}: grad of leaf {i} is {None if g is None else np.asarray(g).tolist()}, torch says "
            f"{np.asarray(w).tolist()} (README.md, section \"{SECTION}\")")


def test_log_softmax_is_stable():
    big = [[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -999.0]]
    program = {"leaves": [big, [0.0]], "requires_grad": [True, False], "ops": [["log_softmax", 0, 1]]}
    got, want = adapter.tensor_program(program), programs.torch_tensor(program)
    assert np.isfinite(got["out"]) and abs(got["out"] - want["out"]) < 1e-9, (
        f"log_softmax of logits near ±1000 gave {got['out']!r}, torch says {want['out']!r}: subtract the row max "
        f"before exp (README.md, section \"{SECTION}\")")
    assert _same(np.asarray(got["grads"][0]), want["grads"][0]), "log_softmax backward at large logits"


def _torch_mlp(x, y, w1, b1, w2, b2, lr, steps):
    params = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in (w1, b1, w2, b2)]
    losses = []
    for _ in range(steps):
        tw1, tb1, tw2, tb2 = params
        logits = torch.relu(torch.tensor(x) @ tw1 + tb1) @ tw2 + tb2
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(y))
        losses.append(float(loss))
        grads = torch.autograd.grad(loss, params)
        params = [(p - lr * g).detach().requires_grad_(True) for p, g in zip(params, grads)]
    return losses


def test_mlp_loss_curve_matches_torch():
    r = programs.rng("mlp")
    g = np.random.default_rng(r.randrange(2**32))
    n, d, hidden, classes = 24, 3, 8, 3
    x = g.normal(size=(n, d))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    w1, b1 = g.normal(scale=0.5, size=(d, hidden)), g.normal(scale=0.1, size=(hidden,))
    w2, b2 = g.normal(scale=0.5, size=(hidden, classes)), g.normal(scale=0.1, size=(classes,))
    lr, steps = r.choice([0.1, 0.3, 0.5]), 25
    got = adapter.mlp_losses(x, y, w1, b1, w2, b2, lr, steps)
    want = _torch_mlp(x, y, w1, b1, w2, b2, lr, steps)
    assert got["inputs_unchanged"], "mlp_training_losses modified the weights it was given (copy them)"
    assert len(got["losses"]) == steps, f"{len(got['losses'])} losses for {steps} steps"
    for step, (a, b) in enumerate(zip(got["losses"], want)):
        assert abs(a - b) <= 1e-6, (f"MLP loss at step {step} is {a!r}, torch's is {b!r} (lr={lr}): "
                                    f"README.md, section \"{SECTION}\"")
    assert want[-1] < want[0], "the toy problem must be learnable (grader self-check)"
