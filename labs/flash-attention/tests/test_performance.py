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


@pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
def test_performance_vs_sdpa(record_perf, grade_fraction):
    import torch
    import torch.nn.functional as F
    from roadmap_cli.grading_kit import timing

    dtype = torch.float16
    rule = timing.StopRule(time_cap_s=2.0)
    ratios = []

    def fresh(seq, head_dim, grad=False):
        return tuple(torch.randn(BATCH, HEADS, seq, head_dim, device="cuda", dtype=dtype).requires_grad_(grad)
                     for _ in range(3))

    for seq, head_dim, causal in SHAPES:
        label = f"n={seq} d={head_dim} {'causal' if causal else 'full'}"

        def check_fwd(out, args):
            o = out[0] if isinstance(out, tuple) else out
            want = F.scaled_dot_product_attention(*args, is_causal=causal)
            torch.testing.assert_close(o, want, atol=2e-2, rtol=2e-2)

        fwd = timing.compare_to_baseline(
            lambda q, k, v: adapter.flash_forward_plain(q, k, v, causal, None),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
            lambda: fresh(seq, head_dim), flops=_flops(seq, head_dim, causal, False), dtype=dtype,
            rule=rule, check=check_fwd)

        def make_bwd_inputs():
            q, k, v = fresh(seq, head_dim, grad=True)
            o_learner = adapter.flash_autograd_plain(q, k, v, causal, None)[0]
            o_sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return o_learner, o_sdpa, q, k, v, torch.randn_like(o_sdpa)

        bwd = timing.compare_to_baseline(
            lambda ol, ob, q, k, v, do: torch.autograd.grad(ol, (q, k, v), do, retain_graph=True),
            lambda ol, ob, q, k, v, do: torch.autograd.grad(ob, (q, k, v), do, retain_graph=True),
            make_bwd_inputs, flops=_flops(seq, head_dim, causal, True), dtype=dtype, rule=rule)

        for name, cmp in (("fwd", fwd), ("bwd", bwd)):
            assert not cmp.impossible, f"{name} {label}: {cmp.summary()}"
            record_perf(f"{name} {label}", cmp.tflops, "TFLOP/s", ratio_vs_sdpa=round(cmp.ratio, 4),
                        pct_of_peak=cmp.pct_of_peak, sdpa_tflops=cmp.baseline_tflops,
                        learner_ms=cmp.learner.median_ms, sdpa_ms=cmp.baseline.median_ms)
            print(f"{name} {label}: {cmp.summary()}")
            ratios.append(cmp.ratio)

    overall = timing.geometric_mean(ratios)
    record_perf("geomean speed vs SDPA", overall, "ratio")
    grade_fraction(timing.score_fraction(overall, full_at=0.8))
