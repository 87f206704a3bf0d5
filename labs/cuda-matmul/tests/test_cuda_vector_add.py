"""Part `cuda-vector-add` (needs a CUDA GPU): vector_add.cu, built with load_inline."""

from __future__ import annotations

import pytest
import torch

import adapter
from inputs import generator, nan_padded, nan_strided, random_values
from roadmap_cli.grading_kit import assert_close, has_cuda, learner_device, returned_on_cuda

TRIALS = 5
# 255/256/257: around one block of 256 threads; 1_000_003: thousands of blocks and a ragged tail.
LENGTHS = [1, 255, 256, 257, 1_000_003]


@pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("n", LENGTHS)
def test_cuda_vector_add(n):
    for trial in range(TRIALS):
        gen = generator(f"cuda-vector-add:{n}:{trial}")
        distribution = "normal" if trial % 2 == 0 else "uniform"
        x_values = random_values((n,), torch.float32, gen, distribution) * 100
        y_values = random_values((n,), torch.float32, gen, distribution) * 100
        # Trials 1 and 3: non-contiguous views (every other element, at an offset).
        view = nan_strided if trial in (1, 3) else nan_padded
        x, y = view(x_values), view(y_values)
        out = adapter.cuda_vector_add(x, y)  # fails if the kernel writes into x or y (checked learner-side)
        assert returned_on_cuda(out) and out.dtype == torch.float32, f"output: {learner_device(out)} {out.dtype}"
        assert_close(out, x_values + y_values, atol=1e-4, what=f"vector_add.cu (n={n}, trial {trial})")
