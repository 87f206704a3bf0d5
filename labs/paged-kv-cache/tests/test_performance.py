"""Part performance (CUDA only): the Triton paged-attention kernel against the
same decode attention over a *contiguous* cache with F.scaled_dot_product_attention,
timed in the same run with the shared harness. Full points at >= 80% of SDPA's
speed (geometric mean over the shapes). The paged kernel pays for indirection
(a block-table load per block); a good kernel loses little to the contiguous baseline.

The timing runs in the learner process (adapter.time_paged_vs_sdpa, where the
kernel lives); only the figures come back here."""

import pytest
from roadmap_cli.grading_kit import has_cuda

import adapter
from report import require

# (num_seqs, num_heads, num_kv_heads, head_dim, context_len, block_size)
SHAPES = [
    (32, 32, 8, 128, 1024, 16),
    (64, 32, 8, 128, 2048, 16),
    (16, 32, 32, 128, 4096, 32),
    (128, 16, 2, 64, 512, 16),
]


@pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
def test_performance_vs_sdpa_contiguous(record_perf, grade_fraction):
    from roadmap_cli.grading_kit import timing

    ratios = []
    for shape in SHAPES:
        num_seqs, num_heads, num_kv_heads, head_dim, context_len, block_size = shape
        result = adapter.time_paged_vs_sdpa(shape, "float16")
        label = f"S={num_seqs} H={num_heads}/{num_kv_heads} D={head_dim} L={context_len} B={block_size}"
        record_perf(f"paged_attention {label}", result["learner_ms"], "ms", baseline_ms=result["baseline_ms"],
                    ratio=result["ratio"], pct_of_peak=result["pct_of_peak"])
        require(not result["impossible"], f"{label}: timing physically impossible: {result['summary']}",
                "How it is graded")
        ratios.append(result["ratio"])
    overall = timing.geometric_mean(ratios)
    record_perf("paged_attention speed vs SDPA (contiguous)", overall, "x")
    grade_fraction(timing.score_fraction(overall))
