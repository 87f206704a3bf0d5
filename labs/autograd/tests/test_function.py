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
