"""Part performance (CUDA only): the Triton paged-attention kernel against the
same decode attention over a *contiguous* cache with F.scaled_dot_product_attention,
timed in the same run with the shared harness. Full points at >= 80% of SDPA's
speed (geometric mean over the shapes). The paged kernel pays for indirection
(a block-table load per block); a good kernel loses little to the contiguous baseline."""

import pytest
from roadmap_cli.grading_kit import has_cuda

import adapter

# (num_seqs, num_heads, num_kv_heads, head_dim, context_len, block_size)
SHAPES = [
    (32, 32, 8, 128, 1024, 16),
    (64, 32, 8, 128, 2048, 16),
    (16, 32, 32, 128, 4096, 32),
    (128, 16, 2, 64, 512, 16),
]


def _inputs(num_seqs, num_heads, num_kv_heads, head_dim, context_len, block_size, dtype):
    """A paged cache with shuffled blocks, and the same tokens laid out contiguously."""
    import torch

    blocks_per_seq = context_len // block_size
    num_blocks = num_seqs * blocks_per_seq
    q = torch.randn(num_seqs, num_heads, head_dim, device="cuda", dtype=dtype)
    kc = torch.randn(num_blocks, block_size, num_kv_heads, head_dim, device="cuda", dtype=dtype)
    vc = torch.randn_like(kc)
    tables = torch.randperm(num_blocks, device="cuda").view(num_seqs, blocks_per_seq).to(torch.int32)
    lens = torch.full((num_seqs,), context_len, device="cuda", dtype=torch.int32)
    # Contiguous (num_seqs, kv_heads, context_len, head_dim): what a non-paged server would hold.
    k = kc[tables.long()].reshape(num_seqs, context_len, num_kv_heads, head_dim).transpose(1, 2).contiguous()
    v = vc[tables.long()].reshape(num_seqs, context_len, num_kv_heads, head_dim).transpose(1, 2).contiguous()
    return q, kc, vc, tables, lens, k, v


@pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
def test_performance_vs_sdpa_contiguous(record_perf, grade_fraction):
    import torch
    import torch.nn.functional as F
    from roadmap_cli.grading_kit import timing

    dtype = torch.float16
    rule = timing.StopRule(time_cap_s=2.0)
    ratios = []
    for shape in SHAPES:
        num_seqs, num_heads, num_kv_heads, head_dim, context_len, block_size = shape
        q, kc, vc, tables, lens, k, v = _inputs(*shape, dtype)
        scale = head_dim ** -0.5

        def paged(q_):
            return adapter.triton_paged_attention_plain(q_, kc, vc, tables, lens, scale)

        def contiguous(q_):
            # (S, H, 1, D) query over (S, KVH, L, D) keys: one decode step, GQA by SDPA.
            return F.scaled_dot_product_attention(q_.unsqueeze(2), k, v, scale=scale,
                                                  enable_gqa=num_heads != num_kv_heads).squeeze(2)

        def check(out, args):
            torch.testing.assert_close(out, contiguous(*args), atol=2e-2, rtol=2e-2)

        # Bytes read: all of K and V once, plus q and out (memory-bound kernel).
        bytes_moved = 2 * num_seqs * context_len * num_kv_heads * head_dim * 2 + 2 * q.numel() * 2
        flops = 4.0 * num_seqs * num_heads * context_len * head_dim
        result = timing.compare_to_baseline(
            paged, contiguous, lambda: torch.randn_like(q), flops=flops, bytes_moved=bytes_moved,
            dtype=dtype, rule=rule, check=check)
        label = f"S={num_seqs} H={num_heads}/{num_kv_heads} D={head_dim} L={context_len} B={block_size}"
        record_perf(f"paged_attention {label}", result.learner.median_ms, "ms",
                    baseline_ms=result.baseline.median_ms, ratio=result.ratio, pct_of_peak=result.pct_of_peak)
        assert not result.impossible, result.summary()
        ratios.append(result.ratio)
    overall = timing.geometric_mean(ratios)
    record_perf("paged_attention speed vs SDPA (contiguous)", overall, "x")
    grade_fraction(timing.score_fraction(overall))
