"""Part 5: grouped-query attention: query head h reads K/V head h // (heads // kv_heads)."""

import pytest
import torch
from roadmap_cli import grading_kit as kit

import adapter
import references as ref

CASES = [  # (heads, kv_heads, seq, head_dim, causal)
    (4, 2, 17, 64, False),
    (6, 2, 64, 32, True),
    (4, 1, 33, 16, False),
    (6, 3, 80, 16, True),
]
DTYPES = [torch.float16, torch.float32]
if ref.ON_GPU:
    CASES += [(32, 8, 1000, 128, True)]
    DTYPES += [torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"h{c[0]}kv{c[1]}-n{c[2]}-d{c[3]}-{'causal' if c[4] else 'full'}")
def test_gqa_forward(case, dtype):
    heads, kv_heads, seq, head_dim, causal = case
    for trial in range(ref.TRIALS):
        dist = ref.DISTRIBUTIONS[trial % 2]
        q, k, v = ref.make_qkv(kit.seeded(f"gqa-{case}-{dtype}-{trial}"), 1, heads, kv_heads, seq, head_dim,
                               dtype, dist)
        o, lse = adapter.flash_forward(q, k, v, causal, None)
        ref.check_forward(o, lse, q, k, v, causal, None)
