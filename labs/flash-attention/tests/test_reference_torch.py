"""Part 1: attention written out in torch (no SDPA, no softmax helper)."""

import pytest
import torch
from roadmap_cli import grading_kit as kit

import adapter
import references as ref

CASES = [  # (batch, heads, kv_heads, seq, head_dim, causal, scale)
    (2, 2, 2, 17, 32, False, None),
    (1, 2, 2, 64, 16, True, None),
    (1, 4, 2, 33, 16, True, 0.3),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c[3]}-d{c[4]}-{'causal' if c[5] else 'full'}-h{c[1]}kv{c[2]}")
def test_matches_reference(case):
    batch, heads, kv_heads, seq, head_dim, causal, scale = case
    for trial in range(5):
        dist = ref.DISTRIBUTIONS[trial % 2]
        q, k, v = ref.make_qkv(kit.seeded(f"ref-{case}-{trial}"), batch, heads, kv_heads, seq, head_dim,
                               torch.float32, dist)
        out = adapter.reference_attention(q, k, v, causal, scale)
        ref_o, _ = ref.reference(q, k, v, causal, scale)
        kit.assert_nontrivial(ref_o, 1e-4, "reference O")
        kit.assert_close(out, ref_o, atol=1e-4, what="O")


def test_large_scores_do_not_overflow():
    """Scores near 1000: exp() overflows unless the row max is subtracted first."""
    q, k, v = ref.make_qkv(kit.seeded("ref-large"), 1, 2, 2, 32, 16, torch.float32, "normal")
    q = q * 400.0
    out = adapter.reference_attention(q, k, v, False, None)
    ref_o, _ = ref.reference(q, k, v, False, None)
    kit.assert_close(out, ref_o, atol=1e-4, what="O with large scores")


def test_rows_whose_scores_are_all_very_negative():
    """Rows whose every score is near -250 (the adversarial rows of every part): exp(s - 0) underflows to 0
    there, so the max subtracted must be the row's own."""
    scale = 0.7
    q, k, v = ref.make_qkv(kit.seeded("ref-negative"), 1, 2, 2, 33, 16, torch.float32, "negative", "bhnd", scale)
    out = adapter.reference_attention(q, k, v, False, scale)
    ref_o, _ = ref.reference(q, k, v, False, scale)
    rounding = float(ref.fp32_score_rounding(q, k, v, scale).max())  # fp32 scores of -250 round at ~1e-5
    kit.assert_close(out, ref_o, atol=1e-4 + rounding, rtol=1e-4, what="O (rows whose scores are all near -250)")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_output_in_q_dtype(dtype):
    """fp16 and bf16 in: O comes back in q's dtype (computed in fp32, rounded once at the end)."""
    q, k, v = ref.make_qkv(kit.seeded(f"ref-dtype-{dtype}"), 1, 2, 2, 17, 16, dtype, "normal")
    out = adapter.reference_attention(q, k, v, True, None)
    assert out.dtype == dtype, (f"reference_attention returned {out.dtype} for {dtype} inputs: O has q's dtype "
                                f"(README.md, 'Part 1: reference-torch')")
    ref_o, _ = ref.reference(q, k, v, True, None)
    tol = ref.tolerance(dtype)
    kit.assert_close(out, ref_o, atol=tol, rtol=tol, what=f"O ({dtype} inputs)")
