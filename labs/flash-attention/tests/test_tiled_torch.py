"""Part 2: the tiled algorithm in torch: online softmax over K/V blocks, returns O and LSE."""

import math

import pytest
import torch
from roadmap_cli import grading_kit as kit

import adapter
import references as ref

CASES = [  # (batch, heads, kv_heads, seq, head_dim, causal, block_size, dtype)
    (1, 2, 2, 129, 32, False, 16, torch.float32),
    (1, 2, 2, 64, 16, True, 16, torch.float32),
    (2, 4, 2, 50, 16, True, 8, torch.float32),
    (1, 1, 1, 1, 16, False, 16, torch.float32),
    # fp16 in: O must come back in q's dtype (the LSE stays fp32).
    (1, 2, 2, 40, 16, False, 16, torch.float16),
    # bf16 too: q's dtype is not "a 2-byte float means float16" (torch runs bf16 on a CPU).
    (1, 2, 2, 40, 16, True, 16, torch.bfloat16),
]


def _case_id(c) -> str:
    dtype = "" if c[7] == torch.float32 else "-" + str(c[7]).replace("torch.", "")
    return f"n{c[3]}-d{c[4]}-{'causal' if c[5] else 'full'}-bs{c[6]}{dtype}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_tiled_matches_reference(case):
    batch, heads, kv_heads, seq, head_dim, causal, block, dtype = case
    for trial in range(5):
        dist = ref.DISTRIBUTIONS[trial % 2]
        q, k, v = ref.make_qkv(kit.seeded(f"tiled-{case}-{trial}"), batch, heads, kv_heads, seq, head_dim,
                               dtype, dist)
        o, lse, shapes = adapter.tiled_attention(q, k, v, causal, None, block)
        ref.check_forward(o, lse, q, k, v, causal, None, section="Part 2: tiled-torch")
        # Tiled means: never a score matrix wider than one block of keys.
        widest = max((s[-1] for s in shapes), default=0)
        assert widest <= max(block, head_dim), (
            f"a matmul produced a result {widest} wide; with block_size={block} no result should be wider "
            f"than max(block_size, head_dim) = {max(block, head_dim)} (do not build the full N x N scores)")
        assert len(shapes) >= math.ceil(seq / block), (
            f"only {len(shapes)} matmul(s) for {math.ceil(seq / block)} K/V blocks: loop over the blocks")


def test_tiled_large_scores():
    """The running max keeps exp() in range even for scores near 1000."""
    q, k, v = ref.make_qkv(kit.seeded("tiled-large"), 1, 2, 2, 48, 16, torch.float32, "rising")
    q = q * 400.0
    o, lse, _ = adapter.tiled_attention(q, k, v, False, None, 16)
    ref_o, ref_lse = ref.reference(q, k, v, False, None)
    kit.assert_close(o, ref_o, atol=1e-4, what="O with large scores")
    kit.assert_close(lse, ref_lse, atol=1e-4, what="LSE with large scores")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tiled_very_negative_rows(causal, dtype):
    """The adversarial rows of every part: every score near -250. A running max that starts at 0 makes
    exp(s - 0) underflow to 0 in every block, and O = 0/0; it must start at -inf."""
    scale = 0.7
    q, k, v = ref.make_qkv(kit.seeded(f"tiled-negative-{causal}-{dtype}"), 1, 2, 2, 48, 32, dtype, "negative",
                           "bhnd", scale)
    o, lse, _ = adapter.tiled_attention(q, k, v, causal, scale, 16)
    ref.check_forward(o, lse, q, k, v, causal, scale, section="Part 2: tiled-torch",
                      context=" (rows whose every score is near -250)")
