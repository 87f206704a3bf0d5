"""Part `matmul`: the Triton tiled matmul: fp16 and fp32 inputs, fp32
accumulation, any M, N, K (1, 127, 129, non-multiples of the block), any strides."""

from __future__ import annotations

import pytest
import torch

import adapter
from inputs import generator, nan_padded, random_values
from roadmap_cli.grading_kit import assert_close, assert_nontrivial, inputs_unchanged, rel_fro_error

TRIALS = 5
MAX_REL_FRO = 1e-2
# (M, N, K). Small enough for the CPU interpreter; none a multiple of 64 except
# where it is the point, so every tail mask and the last (partial) group of
# tiles is exercised. K=1: a single, partial K block.
SHAPES = [
    (1, 1, 1),
    (1, 67, 129),
    (127, 129, 130),
    (129, 127, 33),
    (200, 64, 1),
    (64, 192, 64),
]


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp32 reference from clones taken before the learner's call, on the CPU."""
    return adapter.torch_matmul(a.detach().float().cpu(), b.detach().float().cpu())


def check_matmul(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    expected = reference(a.clone(), b.clone())
    # Elementwise tolerance scaled to the typical output size: fp16 output
    # rounding and TF32 on GPUs stay far inside it; a wrong tile does not.
    scale = float(expected.pow(2).mean().sqrt())
    atol = 2e-2 * scale
    assert_nontrivial(expected, atol, what="reference")
    with inputs_unchanged(a, b, what="matmul input"):
        out = adapter.matmul(a, b)
    assert tuple(out.shape) == (a.shape[0], b.shape[1]), f"{what}: output shape {tuple(out.shape)}"
    assert out.dtype == a.dtype, f"{what}: output dtype {out.dtype}, expected the inputs' {a.dtype}"
    assert out.device == a.device, f"{what}: output on {out.device}, inputs on {a.device}"
    assert torch.isfinite(out.float()).all(), f"{what}: output has NaN/inf (a load past the edge of A or B?)"
    unwritten = int(((out.cpu().float() == adapter.SENTINEL) & (expected != adapter.SENTINEL)).sum())
    assert unwritten == 0, (
        f"{what}: {unwritten} output element(s) still hold {adapter.SENTINEL:g}, the value the grader filled "
        "your output with: were they never written? (grid rounded down? last group of tiles?)"
    )
    error = rel_fro_error(out.cpu(), expected)
    assert error < MAX_REL_FRO, f"{what}: relative Frobenius error {error:.3g} >= {MAX_REL_FRO:g}"
    if expected.numel() > 1:
        assert_close(out.cpu(), expected, atol=atol, rtol=1e-2, what=what)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul(shape, dtype):
    M, N, K = shape
    for trial in range(TRIALS):
        gen = generator(f"matmul:{M}:{N}:{K}:{dtype}:{trial}")
        distribution = "normal" if trial % 2 == 0 else "uniform"
        a = nan_padded(random_values((M, K), dtype, gen, distribution))
        # Every other trial stores B column-major: the kernel must use the strides it is given.
        b = nan_padded(random_values((K, N), dtype, gen, distribution), transposed=trial % 2 == 1)
        check_matmul(a, b, f"matmul {M}x{K} @ {K}x{N} ({dtype}, trial {trial}, {distribution})")


def test_matmul_accumulates_in_fp32():
    """Large terms that cancel, with small ones in between: a running sum in
    fp16 (11-bit significand) rounds the small terms away once it holds the
    large ones (spacing 32 at 32768); fp32 keeps them."""
    M, N, K = 48, 40, 320
    for trial in range(TRIALS):
        gen = generator(f"matmul-cancel:{trial}")
        a = torch.rand((M, K), generator=gen)
        b = torch.rand((K, N), generator=gen)
        a[:, :16], b[:16, :] = 32.0, 64.0  # 16 products of 2048: +32768
        a[:, -16:], b[-16:, :] = 32.0, -64.0  # and -32768 at the end of K
        check_matmul(nan_padded(a.half()), nan_padded(b.half()), f"matmul with cancellation (trial {trial})")


def test_matmul_rejects_mismatched_shapes():
    a = torch.zeros((4, 5), dtype=torch.float32)
    b = torch.zeros((6, 3), dtype=torch.float32)
    with pytest.raises((ValueError, AssertionError, TypeError)):
        adapter.matmul(a, b)

