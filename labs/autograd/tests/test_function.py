"""Part 3: the learner's torch.autograd.Function for a fused, stable softmax
cross-entropy: loss, gradient and double backward (Hessian-vector products)
equal F.cross_entropy's in float64, for both reductions and ignore_index,
at logits near ±1000, and it saves exactly its two inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import adapter
import programs

SECTION = "Part 3: a custom autograd Function"


def _reference(logits, targets, reduction, ignore_index, grad_out, direction):
    x = logits.detach().clone().requires_grad_(True)
    loss = F.cross_entropy(x, targets, reduction=reduction or "mean",
                           ignore_index=-100 if ignore_index is None else ignore_index)
    (grad,) = torch.autograd.grad(loss, x, grad_outputs=grad_out, create_graph=True)
    (hvp,) = torch.autograd.grad((grad * direction).sum(), x)
    return loss.detach(), grad.detach(), hvp.detach()


def _case(r, n, c, scale, reduction, ignore_index):
    g = torch.Generator().manual_seed(r.randrange(2**62))
    logits = torch.randn(n, c, generator=g, dtype=torch.float64) * scale
    targets = torch.randint(0, c, (n,), generator=g)
    if ignore_index is not None:
        targets[torch.rand(n, generator=g) < 0.3] = ignore_index
        targets[0] = r.randrange(c)  # at least one row counts
    grad_out = torch.tensor(r.uniform(0.5, 2.0), dtype=torch.float64)
    direction = torch.randn(n, c, generator=g, dtype=torch.float64)
    return logits, targets, reduction, ignore_index, grad_out, direction


CONFIGS = [(None, None), ("mean", None), ("sum", None), ("mean", -100), ("sum", 7), ("mean", 3)]


@pytest.mark.parametrize("reduction,ignore_index", CONFIGS, ids=[f"{r}-{i}" for r, i in CONFIGS])
def test_matches_f_cross_entropy(reduction, ignore_index):
    r = programs.rng(f"fused-ce-{reduction}-{ignore_index}")
    for trial in range(6):
        n, c = r.randint(1, 9), r.randint(2, 11)
        if ignore_index is not None and 0 <= ignore_index < c:
            c = ignore_index  # ignore_index must not be a real class here
            c = max(c, 2)
        scale = r.choice([1.0, 5.0, 300.0])
        case = _case(r, n, c, scale, reduction, ignore_index)
        got = adapter.fused_cross_entropy(*case)
        want = _reference(*case)
        label = f"softmax_cross_entropy(logits {n}x{c} x{scale:g}, reduction={reduction}, ignore_index={ignore_index})"
        for name, a, b in (("loss", got["loss"], want[0]), ("d loss/d logits", got["grad"], want[1]),
                           ("double backward (Hessian-vector product)", got["hvp"], want[2])):
            assert torch.isfinite(a).all(), f"{label}: {name} has NaN/inf (README.md, section \"{SECTION}\")"
            assert torch.allclose(a, b, rtol=1e-9, atol=1e-9), (
                f"{label}: {name} differs from F.cross_entropy's by {float((a - b).abs().max()):.3g} "
                f"(README.md, section \"{SECTION}\")")
        assert got["uses_custom_function"], f"{label}: the loss was not produced by your torch.autograd.Function"
        assert got["saved_count"] == 2 and got["saved_is_inputs"], (
            f"{label}: ctx saved {got['saved_count']} tensor(s); save exactly (logits, targets) and recompute the "
            f"softmax in backward (README.md, section \"{SECTION}\")")


def test_huge_logits_stay_finite():
    logits = torch.tensor([[1000.0, 999.0, -1000.0], [-1000.0, -1001.0, -999.5]], dtype=torch.float64)
    targets = torch.tensor([2, 0])
    case = (logits, targets, "mean", None, torch.tensor(1.0, dtype=torch.float64), torch.ones(2, 3, dtype=torch.float64))
    got, want = adapter.fused_cross_entropy(*case), _reference(*case)
    assert torch.allclose(got["loss"], want[0], rtol=1e-9, atol=1e-9) and torch.allclose(got["grad"], want[1]), (
        f"logits near ±1000: loss {float(got['loss'])!r} vs {float(want[0])!r}: subtract the row max "
        f"(README.md, section \"{SECTION}\")")


def test_bad_reduction_is_refused():
    logits, targets = torch.zeros(2, 3, dtype=torch.float64), torch.tensor([0, 1])
    assert adapter.fused_cross_entropy_rejects(logits, targets, "none") == "ValueError", \
        "reduction='none' must raise ValueError (only 'mean' and 'sum' are supported)"


# Every floating dtype F.cross_entropy takes: the loss and the gradient keep the logits' dtype.
DTYPE_TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("dtype", list(DTYPE_TOL), ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_keeps_the_logits_dtype(dtype, reduction):
    r = programs.rng(f"fused-ce-dtype-{dtype}-{reduction}")
    g = torch.Generator().manual_seed(r.randrange(2**62))
    n, c = 6, 5
    logits = (torch.randn(n, c, generator=g, dtype=torch.float64) * 3).to(dtype)
    targets = torch.randint(0, c, (n,), generator=g)
    targets[1] = -100
    case = (logits, targets, reduction, -100, torch.tensor(1.0, dtype=dtype), torch.ones(n, c, dtype=dtype))
    got = adapter.fused_cross_entropy(*case)
    want_loss, want_grad, _ = _reference(logits.double(), targets, reduction, -100,
                                         torch.tensor(1.0, dtype=torch.float64), torch.ones(n, c, dtype=torch.float64))
    label = f"softmax_cross_entropy({str(dtype).removeprefix('torch.')} logits {n}x{c}, reduction={reduction})"
    for name, a, b in (("loss", got["loss"], want_loss), ("d loss/d logits", got["grad"], want_grad)):
        assert a.dtype == dtype, (f"{label}: {name} is {a.dtype}; F.cross_entropy keeps the logits' dtype "
                                  f"(README.md, section \"{SECTION}\")")
        tol = DTYPE_TOL[dtype]
        assert torch.allclose(a.double(), b, rtol=tol, atol=tol), (
            f"{label}: {name} differs from F.cross_entropy's (float64) by {float((a.double() - b).abs().max()):.3g} "
            f"(README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_every_target_ignored(reduction):
    """F.cross_entropy's edge: no row counts. "mean" is 0 / 0 = NaN, "sum" is 0; the gradient is 0 either way."""
    logits = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], dtype=torch.float64)
    targets = torch.tensor([-100, -100])
    case = (logits, targets, reduction, -100, torch.tensor(1.0, dtype=torch.float64), torch.ones(2, 3, dtype=torch.float64))
    got, want = adapter.fused_cross_entropy(*case), _reference(*case)
    assert torch.equal(torch.isnan(got["loss"]), torch.isnan(want[0])) and (
        torch.isnan(want[0]) or torch.equal(got["loss"], want[0])), (
        f"every target ignored, reduction={reduction}: loss {float(got['loss'])!r}, F.cross_entropy's is "
        f"{float(want[0])!r} (README.md, section \"{SECTION}\")")
    assert torch.equal(got["grad"], want[1]), (
        f"every target ignored, reduction={reduction}: d loss/d logits {got['grad'].tolist()}, F.cross_entropy's "
        f"is {want[1].tolist()} (README.md, section \"{SECTION}\")")
