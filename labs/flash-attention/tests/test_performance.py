"""Part 8 (CUDA only): forward and backward against F.scaled_dot_product_attention,
timed in the same run with the shared harness. Full points at >= 80% of SDPA's speed
(geometric mean over the shapes and both passes)."""

import pytest
from roadmap_cli.grading_kit import has_cuda

import adapter

BATCH, HEADS = 4, 32
SHAPES = [  # (seq, head_dim, causal)
    (1024, 64, False),
    (1024, 128, True),
    (4096, 64, True),
    (4096, 128, False),
    (8192, 64, False),
    (8192, 128, True),
]


def _flops(seq: int, head_dim: int, causal: bool, backward: bool) -> float:
    """Forward 4*B*H*N^2*D (two matmuls of 2*N^2*D), halved when causal; backward is 2.5x."""
    flops = 4.0 * BATCH * HEADS * seq * seq * head_dim * (0.5 if causal else 1.0)
    return flops * (2.5 if backward else 1.0)


SECTION = "Part 8: performance (CUDA GPU only)"


@pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
def test_performance_vs_sdpa(record_perf, grade_fraction):
    from roadmap_cli.grading_kit import timing

    ratios = []
    for seq, head_dim, causal in SHAPES:
        label = f"n={seq} d={head_dim} {'causal' if causal else 'full'}"
        # Timed in the learner process (adapter.time_against_sdpa); only numbers come back.
        result = adapter.time_against_sdpa(BATCH, HEADS, seq, head_dim, causal,
                                           _flops(seq, head_dim, causal, False), _flops(seq, head_dim, causal, True))
        if result["check_error"]:
            raise AssertionError(f"{label}: {result['check_error']} (README.md, '{SECTION}')")
        for name in ("fwd", "bwd"):
            cmp = result[name]
            if cmp["impossible"]:
                raise AssertionError(f"{name} {label}: physically impossible time (faster than the roofline): "
                                     f"{cmp['summary']} (README.md, '{SECTION}')")
            record_perf(f"{name} {label}", cmp["tflops"], "TFLOP/s", ratio_vs_sdpa=round(cmp["ratio"], 4),
                        pct_of_peak=cmp["pct_of_peak"], sdpa_tflops=cmp["baseline_tflops"],
                        learner_ms=cmp["learner_median_ms"], sdpa_ms=cmp["baseline_median_ms"])
            print(f"{name} {label}: {cmp['summary']}")
            ratios.append(cmp["ratio"])

    overall = timing.geometric_mean(ratios)
    record_perf("geomean speed vs SDPA", overall, "ratio")
    grade_fraction(timing.score_fraction(overall, full_at=0.8))
