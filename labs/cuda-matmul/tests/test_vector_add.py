"""Part `vector-add`: the Triton vector add, any length (masked tail)."""

from __future__ import annotations

import pytest
import torch

import adapter
from inputs import generator, random_values
from roadmap_cli.grading_kit import assert_close, assert_nontrivial, to_device

SECTION = "Part 1: Triton vector add"

TRIALS = 5
# 1 and 7: shorter than any block; 1024: exactly one block of 1024;
# 1025 and 4097: one element into a new block; 10_007: ten blocks and a ragged tail.
LENGTHS = [1, 7, 1024, 1025, 4097, 10_007]
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("n", LENGTHS)
def test_vector_add(n, dtype):
    for trial in range(TRIALS):
        gen = generator(f"vector-add:{n}:{dtype}:{trial}")
        distribution = "normal" if trial % 2 == 0 else "uniform"
        x_values = random_values((n,), dtype, gen, distribution) * 100  # well above atol
        # For tiny n, x + y can cancel to ~0, which would make the check
        # meaningless: redraw y until the reference is clearly nonzero.
        for _ in range(20):
            y_values = random_values((n,), dtype, gen, distribution) * 100
            expected = x_values.float() + y_values.float()
            if expected.abs().max() > 10 * TOLERANCE[dtype]:
                break
        assert_nontrivial(expected, TOLERANCE[dtype])
        out = run_vector_add(x_values, y_values, f"vector_add(n={n}, {dtype}, trial {trial})")
        assert_close_in_section(out, expected, TOLERANCE[dtype], f"vector_add(n={n}, {dtype}, trial {trial})")


def run_vector_add(x, y, what: str, step: int = 1):
    """The learner's vector_add on NaN-guarded copies of x, y; fails on any guard's finding.
    step > 1: x and y arrive as non-contiguous views (every step-th element of a NaN buffer)."""
    facts = adapter.vector_add(to_device(x), to_device(y), step=step)
    if not facts["launches"]:
        raise AssertionError(f"{what}: returned without launching a @triton.jit kernel (README.md, '{SECTION}')")
    if facts["violations"]:
        raise AssertionError(
            f"{what}: out-of-bounds memory access: {'; '.join(facts['violations'][:3])}. [n+k] is k elements "
            f"past the last one: the last program's block sticks out past n, so mask its loads AND its store "
            f"with offsets < n (README.md, '{SECTION}')")
    if facts["overruns"]:
        raise AssertionError(f"{what}: {'; '.join(facts['overruns'])}: a store without the tail mask? "
                             f"(README.md, '{SECTION}')")
    out = facts["out"]
    if out.dtype != x.dtype:
        raise AssertionError(f"{what}: output dtype: expected {x.dtype}, got {out.dtype} (README.md, '{SECTION}')")
    return out


def assert_close_in_section(out, expected, atol: float, what: str) -> None:
    try:
        assert_close(out.cpu(), expected.cpu(), atol=atol, what=what)
    except AssertionError as error:
        raise AssertionError(f"{error} (README.md, '{SECTION}')") from None


def test_vector_add_is_elementwise_not_broadcast():
    """x and y differ everywhere: swapping, reusing one input or adding a
    constant would all show up here."""
    n = 3000
    x = torch.arange(n, dtype=torch.float32)
    y = torch.arange(n, dtype=torch.float32) * -2 + 0.5
    out = run_vector_add(x, y, "vector_add(arange, -2*arange+0.5)")
    assert_close_in_section(out, torch.arange(n, dtype=torch.float32) * -1 + 0.5, 1e-4,
                            "vector_add(arange, -2*arange+0.5)")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_vector_add_strided_inputs(dtype):
    """x and y are every other element of a NaN-filled buffer, at an offset (README.md, 'How
    it is graded': inputs are views into bigger buffers; never assume a layout). A kernel
    that indexes x_ptr + i without the stride reads the NaN in between."""
    n = 1500
    gen = generator(f"vector-add-strided:{dtype}")
    x = random_values((n,), dtype, gen) * 100
    y = random_values((n,), dtype, gen) * 100
    what = f"vector_add(x[::2], y[::2], n={n}, {dtype})"
    out = run_vector_add(x, y, what, step=2)
    if tuple(out.shape) != (n,):
        raise AssertionError(f"{what}: output shape: expected {(n,)}, got {tuple(out.shape)} (README.md, '{SECTION}')")
    assert_close_in_section(out, x.float() + y.float(), TOLERANCE[dtype], what)
