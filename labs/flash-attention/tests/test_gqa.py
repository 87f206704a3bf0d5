"""Part 5: grouped-query attention: query head h reads K/V head h // (heads // kv_heads)."""

import pytest
import torch
from roadmap_cli import grading_kit as kit

import references as ref
from test_triton_forward import NEGATIVE_ROW_PROB, run_forward, tiles_for

SECTION = "Part 5: gqa"
# (batch, heads, kv_heads, seq, head_dim, causal, scale, layout): group sizes 2 and 3 and
# kv_heads = 1; batch 2 (the K/V head index must include the batch); mixed layouts.
CASES = [
    (2, 4, 2, 17, 64, False, None, "bhnd"),
    (1, 6, 2, 33, 32, True, 0.5, ("bnhd", "bhnd", "bnhd")),
    (1, 4, 1, 31, 16, False, None, "bnhd"),
    (2, 6, 3, 40, 16, True, None, ("bhnd", "bnhd", "bhnd")),
]
DTYPES = [torch.float16, torch.float32]
if ref.ON_GPU:
    CASES += [(2, 32, 8, 1000, 128, True, None, "bhnd")]
    DTYPES += [torch.bfloat16] if ref.BF16 else []


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("case", CASES,
                         ids=lambda c: f"b{c[0]}h{c[1]}kv{c[2]}-n{c[3]}-d{c[4]}-{'causal' if c[5] else 'full'}")
def test_gqa_forward(case, dtype):
    batch, heads, kv_heads, seq, head_dim, causal, scale, layout = case
    for trial in range(ref.TRIALS):
        dist = ref.DISTRIBUTIONS[trial % 2]
        q, k, v = ref.make_qkv(kit.seeded(f"gqa-{case}-{dtype}-{trial}"), batch, heads, kv_heads, seq, head_dim,
                               dtype, dist, layout, scale, NEGATIVE_ROW_PROB)
        run_forward(q, k, v, causal, scale, SECTION, pad_rows=trial % 2 == 1, tiles=tiles_for(trial, CASES.index(case)))
