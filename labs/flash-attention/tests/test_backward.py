"""Part 6: the backward in Triton (dQ, dK, dV from the saved LSE) inside a torch.autograd.Function."""

import pytest
import torch
from roadmap_cli import grading_kit as kit

import adapter
import references as ref

CASES = [  # (heads, kv_heads, seq, head_dim, causal, dtype)
    (2, 2, 1, 16, False, torch.float32),
    (2, 2, 17, 64, False, torch.float16),
    (2, 2, 64, 32, True, torch.float32),
    (2, 2, 129, 64, True, torch.float16),
    (4, 2, 33, 32, True, torch.float32),
    (4, 1, 48, 16, False, torch.float16),
]
if ref.ON_GPU:
    CASES += [(8, 2, 1000, 128, True, torch.float16), (4, 4, 257, 64, False, torch.bfloat16)]


@pytest.mark.parametrize(
    "case", CASES,
    ids=lambda c: f"h{c[0]}kv{c[1]}-n{c[2]}-d{c[3]}-{'causal' if c[4] else 'full'}-{str(c[5]).replace('torch.', '')}")
def test_backward(case):
    heads, kv_heads, seq, head_dim, causal, dtype = case
    atol = ref.tolerance(dtype)
    for trial in range(ref.TRIALS):
        dist = ref.DISTRIBUTIONS[trial % 2]
        seed = kit.seeded(f"bwd-{case}-{trial}")
        q, k, v = ref.make_qkv(seed, 1, heads, kv_heads, seq, head_dim, dtype, dist)
        do = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed + 1)).to(q.device, dtype)
        o, lse, dq, dk, dv = adapter.flash_forward_backward(q, k, v, do, causal, None)
        ref.check_forward(o, lse, q, k, v, causal, None)
        ref_dq, ref_dk, ref_dv = ref.reference_grads(q, k, v, do, causal, None)
        for name, got, want in (("dQ", dq, ref_dq), ("dK", dk, ref_dk), ("dV", dv, ref_dv)):
            if seq > 1 or name == "dV":  # with one key, softmax is constant: dQ = dK = 0 exactly
                kit.assert_nontrivial(want, atol, f"reference {name}")
            kit.assert_close(got, want, atol=atol, what=name)
