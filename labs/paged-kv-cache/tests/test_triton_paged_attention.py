"""Part triton-paged-attention: the Triton kernel vs gather-then-attend in fp32
within 1e-3 (on a CPU under TRITON_INTERPRET=1, so shapes stay small). Torch may
not do the math and a Triton kernel must launch (adapter.py)."""

import random

import pytest
from roadmap_cli.grading_kit import assert_close, assert_nontrivial, device, seeded

import adapter
from cases import paged_case
from reference import gather_then_attend

ATOL = 1e-3


# (block_size, num_heads, num_kv_heads, head_dim, max_len): every block size is a power of two;
# the interpreter runs one program at a time, so contexts stay short on a CPU.
SHAPES = [(1, 2, 2, 16, 6), (2, 4, 2, 16, 9), (4, 4, 1, 24, 13), (16, 4, 2, 32, 40)]


@pytest.mark.parametrize("block_size,num_heads,num_kv_heads,head_dim,max_len", SHAPES)
def test_triton_kernel_matches_gather_then_attend(block_size, num_heads, num_kv_heads, head_dim, max_len):
    rng = random.Random(seeded(f"triton-{block_size}-{num_heads}-{num_kv_heads}-{head_dim}"))
    dev = device()
    for trial in range(5):
        q, kc, vc, tables, lens, scale = paged_case(
            rng, num_seqs=2, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
            block_size=block_size, max_len=max_len, distribution="shifted" if trial % 2 else "normal")
        want = gather_then_attend(q, kc, vc, tables, lens, scale)
        assert_nontrivial(want, ATOL)
        got = adapter.triton_paged_attention(q.to(dev), kc.to(dev), vc.to(dev), tables.to(dev), lens.to(dev), scale)
        assert_close(got.cpu(), want, atol=ATOL, what=f"Triton paged attention (block_size {block_size}, "
                                                        f"{num_heads}/{num_kv_heads} heads, lens {lens.tolist()})")
