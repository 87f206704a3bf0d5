"""Part `vector-add`: the Triton vector add, any length (masked tail)."""

from __future__ import annotations

import pytest
import torch

import adapter
from inputs import generator, nan_padded, random_values
from roadmap_cli.grading_kit import assert_close, assert_nontrivial, inputs_unchanged

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
        x, y = nan_padded(x_values), nan_padded(y_values)
        assert_nontrivial(expected, TOLERANCE[dtype])
        with inputs_unchanged(x, y):
            out = adapter.vector_add(x, y)
        assert out.dtype == dtype, f"output dtype {out.dtype}, expected {dtype}"
        assert out.device == x.device, f"output on {out.device}, inputs on {x.device}"
        assert_close(out, expected, atol=TOLERANCE[dtype], what=f"vector_add(n={n}, {dtype}, trial {trial})")


def test_vector_add_is_elementwise_not_broadcast():
    """x and y differ everywhere: swapping, reusing one input or adding a
    constant would all show up here."""
    n = 3000
    x = nan_padded(torch.arange(n, dtype=torch.float32))
    y = nan_padded(torch.arange(n, dtype=torch.float32) * -2 + 0.5)
    out = adapter.vector_add(x, y)
    assert_close(out, torch.arange(n, dtype=torch.float32) * -1 + 0.5, atol=1e-4, what="vector_add(arange, -2*arange+0.5)")
