"""Part `performance` (needs a CUDA GPU): the Triton matmul against torch.matmul
(cuBLAS), fp16, timed in the same process with the shared harness
(roadmap_cli.grading_kit.timing: L2 flushed before every call, outside the
CUDA events; warm-up; std-err stopping rule; learner and baseline alternate
on the same fresh inputs). Per shape: score = baseline time / learner time,
full points at >= 80% of the baseline, linear below."""

from __future__ import annotations

import pytest
import torch

import adapter
from inputs import generator
from roadmap_cli.grading_kit import has_cuda, score_fraction

SECTION = "Part 5: Performance"
# (M, N, K): the classic square benchmark, a short-K shape (more memory traffic
# per flop), and an LLM MLP projection (2048 tokens, hidden 4096 -> 11008).
PERF_SHAPES = [(4096, 4096, 4096), (8192, 8192, 1024), (2048, 11008, 4096)]
FULL_POINTS_AT = 0.8


@pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", PERF_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_speed(shape, record_perf, grade_fraction):
    M, N, K = shape
    seed = int(torch.randint(0, 2**62, (1,), generator=generator(f"perf:{M}:{N}:{K}")))
    result = adapter.time_matmul(M, N, K, seed)  # timed in the learner process
    what = f"matmul fp16 {M}x{N}x{K}"
    if not result["launches"]:
        raise AssertionError(f"{what}: matmul returned without launching a @triton.jit kernel "
                             f"(README.md, '{SECTION}')")
    if result["check_error"]:
        raise AssertionError(f"{what}: output under timing is wrong: {result['check_error']} "
                             f"(README.md, '{SECTION}')")
    if result["impossible"]:
        raise AssertionError(f"{what}: physically impossible time (faster than the roofline): "
                             f"{result['summary']} (README.md, '{SECTION}')")
    record_perf(
        f"matmul_fp16_{M}x{N}x{K}",
        result["tflops"],
        "TFLOP/s",
        pct_of_baseline=round(100 * result["ratio"], 1),
        pct_of_peak=None if result["pct_of_peak"] is None else round(result["pct_of_peak"], 1),
        baseline_tflops=result["baseline_tflops"],
        median_ms=result["learner_median_ms"],
        baseline_median_ms=result["baseline_median_ms"],
        device=result["device"],
        warnings="; ".join(result["warnings"]),
    )
    grade_fraction(score_fraction(result["ratio"], full_at=FULL_POINTS_AT))
