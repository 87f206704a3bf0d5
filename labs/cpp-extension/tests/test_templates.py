"""Part 2: one templated row kernel, dispatched for float32, float64,
bfloat16 and float16, compared with the grader's torch reference."""

from __future__ import annotations

import pytest
import torch

import adapter
import build
import reference
from roadmap_cli import grading_kit as kit

SECTION = "Part 2: templates and dispatch"
# Tolerances: the reference follows the same rounding order, so only the
# accumulation order differs (a few ulp of the storage type).
TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12), torch.bfloat16: (1.6e-2, 1e-2),
       torch.float16: (2e-3, 1e-3)}
SHAPES = [(1, 1), (3, 7), (17, 64), (2, 5, 33), (64, 1000)]


def expect_close(got, want, rtol, atol, what):
    """|got - want| <= atol + rtol * |want| elementwise, computed in float64,
    with the worst element named."""
    g, w = got.double(), want.double()
    if g.shape != w.shape:
        pytest.fail(f"{what}: shape {tuple(g.shape)}, expected {tuple(w.shape)} (README.md, section \"{SECTION}\")", pytrace=False)
    if g.numel() == 0:
        return
    excess = (g - w).abs() - (atol + rtol * w.abs())
    excess = torch.where(torch.isnan(excess), torch.full_like(excess, float("inf")), excess)
    worst = int(excess.flatten().argmax())
    if excess.flatten()[worst] > 0:
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), g.shape))
        pytest.fail(f"{what}: element {idx} = {g[idx].item():.6g}, expected {w[idx].item():.6g} "
                    f"(rtol {rtol:g}, atol {atol:g}) (README.md, section \"{SECTION}\")", pytrace=False)


def _inputs(shape, dtype, seed_name):
    g = torch.Generator().manual_seed(kit.seeded(seed_name) % (2**31))
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 3 + 0.5).to(dtype)
    w = (torch.rand(shape[-1], generator=g, dtype=torch.float64) * 2 - 0.5).to(dtype)
    return x, w


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16],
                         ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_torch(dtype, shape):
    so = build.extension()
    x, w = _inputs(shape, dtype, f"rms-{dtype}-{shape}")
    eps = 1e-5 if dtype != torch.float64 else 1e-9
    got = adapter.rms_norm(so, x, w, eps)
    want = reference.rms_norm(x, w, eps)
    if got.dtype != dtype or tuple(got.shape) != tuple(shape):
        pytest.fail(f"rms_norm(x {tuple(shape)} {dtype}) returned {got.dtype} of shape {tuple(got.shape)}, expected "
                    f"{dtype} of shape {tuple(shape)} (README.md, section \"{SECTION}\")", pytrace=False)
    rtol, atol = TOL[dtype]
    expect_close(got, want, rtol, atol, f"rms_norm {dtype} {tuple(shape)}")


def test_eps_is_used():
    """A row of zeros: the result is 0 only if eps keeps the division finite;
    a large eps visibly shrinks a small row."""
    so = build.extension()
    x = torch.tensor([[0.0, 0.0, 0.0], [1e-3, -2e-3, 3e-3]])
    w = torch.tensor([1.0, 2.0, 3.0])
    got = adapter.rms_norm(so, x, w, 0.5)
    expect_close(got, reference.rms_norm(x, w, 0.5), 1e-6, 1e-7, "rms_norm with eps=0.5")


def test_non_contiguous_input():
    so = build.extension()
    x = torch.randn(40, 24).t()  # [24, 40], strides (1, 24)
    w = torch.randn(40)
    expect_close(adapter.rms_norm(so, x, w, 1e-6), reference.rms_norm(x, w, 1e-6), 1e-5, 1e-5,
                 "rms_norm of a transposed (non-contiguous) x")
