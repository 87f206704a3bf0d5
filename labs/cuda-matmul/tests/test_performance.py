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
from roadmap_cli.grading_kit import (
    compare_to_baseline,
    count_triton_launches,
    forbid_torch_ops,
    has_cuda,
    rel_fro_error,
    score_fraction,
)

# (M, N, K): the classic square benchmark, a short-K shape (more memory traffic
# per flop), and an LLM MLP projection (2048 tokens, hidden 4096 -> 11008).
PERF_SHAPES = [(4096, 4096, 4096), (8192, 8192, 1024), (2048, 11008, 4096)]
FULL_POINTS_AT = 0.8


@pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", PERF_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_speed(shape, record_perf, grade_fraction):
    M, N, K = shape
    learner_matmul = adapter.matmul_unguarded()
    cpu_gen = generator(f"perf:{M}:{N}:{K}")
    gen = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**62, (1,), generator=cpu_gen)))

    def make_inputs():  # fresh contents for every timed call
        a = torch.randn((M, K), device="cuda", dtype=torch.float16, generator=gen)
        b = torch.randn((K, N), device="cuda", dtype=torch.float16, generator=gen)
        return a, b

    def check(out, args):  # the timed output must still be right (first and last timed call)
        a, b = args
        error = rel_fro_error(out.float(), adapter.torch_matmul(a.float(), b.float()))
        assert error < 1e-2, f"{M}x{N}x{K}: output under timing is wrong (relative Frobenius error {error:.3g})"

    with forbid_torch_ops(*adapter.MATMUL_OPS), count_triton_launches() as launches:
        result = compare_to_baseline(
            learner_matmul,
            adapter.torch_matmul,  # torch.matmul saved before the guard: cuBLAS
            make_inputs,
            flops=2.0 * M * N * K,
            bytes_moved=2.0 * (M * K + K * N + M * N),
            dtype=torch.float16,
            check=check,
        )
    assert launches.count > 0, "matmul returned without launching a @triton.jit kernel"
    assert not result.impossible, f"physically impossible time: {result.summary()}"
    record_perf(
        f"matmul_fp16_{M}x{N}x{K}",
        result.tflops,
        "TFLOP/s",
        pct_of_baseline=round(100 * result.ratio, 1),
        pct_of_peak=None if result.pct_of_peak is None else round(result.pct_of_peak, 1),
        baseline_tflops=result.baseline_tflops,
        median_ms=result.learner.median_ms,
        baseline_median_ms=result.baseline.median_ms,
        device=result.device,
        warnings="; ".join(result.warnings),
    )
    grade_fraction(score_fraction(result.ratio, full_at=FULL_POINTS_AT))
