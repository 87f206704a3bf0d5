"""Numeric comparisons that can actually fail.

A check is only meaningful if the reference is well above the tolerance and
the output is not a constant (KernelBench issue #165: all-zero outputs passed
problems whose reference was tiny). NaN/inf must match position for position.
"""

from __future__ import annotations


def assert_nontrivial(reference, atol: float, what: str = "reference") -> None:
    """Refuse a test whose reference is too small for `atol` to mean anything."""
    peak = reference.detach().abs().max().item() if reference.numel() else 0.0
    if not peak > 10 * atol:
        raise AssertionError(f"test is too weak: max |{what}| = {peak:.3g} is not well above atol={atol:g}")


def assert_close(actual, expected, *, atol: float, rtol: float | None = None, what: str = "output") -> None:
    """Elementwise |a - e| <= atol + rtol * |e|, computed in fp32.

    Also checks shape, NaN/inf positions, and that a non-constant reference is
    not matched by a constant output.
    """
    import torch

    rtol = atol if rtol is None else rtol
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    a = actual.detach().to(torch.float32).cpu()
    e = expected.detach().to(torch.float32).cpu()
    bad_a, bad_e = ~torch.isfinite(a), ~torch.isfinite(e)
    if not torch.equal(bad_a, bad_e):
        count = int((bad_a != bad_e).sum())
        raise AssertionError(f"{what}: {count} NaN/inf value(s) where the reference has none (or vice versa)")
    a, e = a[~bad_e], e[~bad_e]
    if e.numel() > 1 and float(e.std()) > 0 and float(a.std()) == 0:
        raise AssertionError(f"{what}: output is constant ({float(a.flatten()[0]):.4g}) but the reference is not")
    diff = (a - e).abs()
    limit = atol + rtol * e.abs()
    over = diff > limit
    if bool(over.any()):
        worst = int(torch.argmax(diff - limit))
        raise AssertionError(
            f"{what}: {int(over.sum())}/{e.numel()} values off; worst |diff| = {float(diff[worst]):.3g} "
            f"(got {float(a[worst]):.5g}, expected {float(e[worst]):.5g}; atol={atol:g}, rtol={rtol:g})"
        )


def rel_fro_error(actual, expected) -> float:
    """||a - e||_F / ||e||_F in fp32 (the matmul criterion: < 1e-2)."""
    import torch

    a = actual.detach().to(torch.float32)
    e = expected.detach().to(torch.float32)
    return float(torch.linalg.norm(a - e) / torch.linalg.norm(e).clamp_min(1e-30))
