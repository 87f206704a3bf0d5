"""Part `cuda-matmul` (needs a CUDA GPU): matmul.cu, naive then shared-memory tiled."""

from __future__ import annotations

import pytest
import torch

import adapter
from inputs import generator, nan_padded, random_values
from roadmap_cli.grading_kit import (assert_close, has_cuda, learner_device, rel_fro_error,
                                     returned_on_cuda)

TRIALS = 5
MAX_REL_FRO = 1e-2
# Edges of the 16x16 (naive) and 32x32 (tiled) blocks, a K that is not a
# multiple of the tile, and one bigger square.
SHAPES = [(1, 1, 1), (31, 33, 17), (127, 129, 130), (129, 127, 33), (512, 512, 512), (1000, 513, 300)]


@pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("variant", ["naive", "tiled"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_cuda_matmul(shape, variant):
    M, N, K = shape
    for trial in range(TRIALS):
        gen = generator(f"cuda-matmul:{variant}:{M}:{N}:{K}:{trial}")
        distribution = "normal" if trial % 2 == 0 else "uniform"
        a = nan_padded(random_values((M, K), torch.float32, gen, distribution))
        b = nan_padded(random_values((K, N), torch.float32, gen, distribution), transposed=trial % 2 == 1)
        expected = adapter.torch_matmul(a.clone().cpu(), b.clone().cpu())
        what = f"matmul_{variant} {M}x{K} @ {K}x{N} (trial {trial}, {distribution})"
        out = adapter.cuda_matmul(variant, a, b)  # fails if the kernel writes into a or b (checked learner-side)
        assert tuple(out.shape) == (M, N) and returned_on_cuda(out), \
            f"{what}: output {tuple(out.shape)} on {learner_device(out)}"
        error = rel_fro_error(out.cpu(), expected)
        assert error < MAX_REL_FRO, f"{what}: relative Frobenius error {error:.3g} >= {MAX_REL_FRO:g}"
        if expected.numel() > 1:
            scale = float(expected.pow(2).mean().sqrt())
            assert_close(out.cpu(), expected, atol=2e-2 * scale, rtol=1e-2, what=what)
