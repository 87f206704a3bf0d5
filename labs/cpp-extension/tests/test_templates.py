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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_rounding_order(dtype):
    """Round x * inv_rms to the storage type, then scale by the weight and
    round again. Rounding once at the end (x * inv_rms * w in float) stays
    inside test_matches_torch's tolerance but differs from the reference in
    about a quarter of the elements; the right order differs only where the
    accumulation order moves inv_rms by an ulp (well under 1 in 1000)."""
    so = build.extension()
    x, w = _inputs((64, 1000), dtype, f"rounding-{dtype}")
    got = adapter.rms_norm(so, x, w, 1e-5)
    want = reference.rms_norm(x, w, 1e-5)
    if got.dtype != dtype or got.shape != want.shape:
        pytest.fail(f"rms_norm {dtype}: returned {got.dtype} {tuple(got.shape)} (README.md, section \"{SECTION}\")",
                    pytrace=False)
    differ = int((got != want).sum())
    if differ > want.numel() // 100:
        pytest.fail(f"rms_norm {dtype} (64, 1000): {differ} of {want.numel()} elements are not bit-equal to the "
                    f"reference (at most 1% may differ by accumulation order): round x * inv_rms to {dtype} first, "
                    f"then multiply by the weight and round again (README.md, section \"{SECTION}\")", pytrace=False)


def _views():
    """(what, x, weight): inputs that are views, not fresh contiguous tensors.
    The op must give the result of their contiguous copies."""
    g = torch.Generator().manual_seed(kit.seeded("views") % (2**31))
    base = torch.randn(30, 80, generator=g)
    wbase = torch.randn(200, generator=g)
    return [
        ("transposed x, strides (1, 24)", torch.randn(40, 24, generator=g).t(), torch.randn(40, generator=g)),
        ("every other column of x", base[:, ::2], wbase[:40]),
        ("a block of x at a storage offset (rows 3..9, columns 5..45)", base[3:10, 5:45], wbase[:40]),
        ("contiguous rows of x at a storage offset", base[7:12], wbase[:80]),
        ("every other element of weight", base[:, :40], wbase[::5]),
        ("weight at a storage offset", base[:, :40], wbase[17:57]),
        ("a 3-D x expanded along its first dimension (stride 0)", base[:4, :40].unsqueeze(0).expand(3, 4, 40),
         wbase[:40]),
    ]


@pytest.mark.parametrize("index", range(7), ids=["transposed", "column-stride", "offset-block", "offset-rows",
                                                 "strided-weight", "offset-weight", "expanded"])
def test_non_contiguous_input(index):
    what, x, w = _views()[index]
    so = build.extension()
    expect_close(adapter.rms_norm(so, x, w, 1e-6), reference.rms_norm(x.contiguous(), w.contiguous(), 1e-6),
                 1e-5, 1e-5, f"rms_norm of {what}")
