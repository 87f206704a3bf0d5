"""Part 3: the Triton forward kernel: O and LSE, any length, head_dim 16-128, fp16/fp32 (bf16 on GPU)."""

import pytest
import torch
from roadmap_cli import grading_kit as kit

import adapter
import references as ref

# (batch, heads, seq, head_dim, scale, layout); K/V heads == heads here (GQA is part 5).
CASES = [
    (2, 2, 1, 16, None, "bhnd"),
    (1, 2, 17, 64, None, "bhnd"),
    (1, 2, 64, 32, 0.3, "bhnd"),
    (1, 2, 129, 64, None, "bhnd"),
    (1, 1, 33, 80, None, "bnhd"),
    (1, 1, 17, 128, None, "bhnd"),
]
DTYPES = [torch.float16, torch.float32]
if ref.ON_GPU:
    CASES += [(2, 4, 1000, 128, None, "bhnd"), (1, 2, 257, 64, None, "bnhd")]
    DTYPES += [torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"b{c[0]}h{c[1]}-n{c[2]}-d{c[3]}-{c[5]}")
def test_forward(case, dtype):
    batch, heads, seq, head_dim, scale, layout = case
    if dtype == torch.float32 and head_dim == 128 and not ref.ON_GPU:
        pytest.skip("covered by fp16 on CPU (keeps the interpreter run short)")
    for trial in range(ref.TRIALS):
        dist = ref.DISTRIBUTIONS[trial % 2]
        q, k, v = ref.make_qkv(kit.seeded(f"fwd-{case}-{dtype}-{trial}"), batch, heads, heads, seq, head_dim,
                               dtype, dist, layout)
        o, lse = adapter.flash_forward(q, k, v, False, scale)
        ref.check_forward(o, lse, q, k, v, False, scale)
