"""Part `attention`: causal multi-head self-attention, written out (no
scaled_dot_product_attention), equal to the reference within 1e-5 with fixed
weights, and causal: changing future tokens never changes earlier outputs."""

from __future__ import annotations

import pytest
import torch

import adapter
import reference
from roadmap_cli.grading_kit import assert_close, seeded

# (B, T, C, n_head): a single token, odd lengths, one head, many heads.
SHAPES = [(1, 1, 8, 2), (2, 7, 16, 4), (3, 33, 32, 4), (2, 12, 24, 1), (1, 20, 48, 8)]
TRIALS = 5


@pytest.mark.parametrize("B,T,C,nh", SHAPES)
def test_attention_matches_reference(B, T, C, nh):
    for trial in range(TRIALS):
        gen = torch.Generator().manual_seed(seeded(f"attention-{B}-{T}-{C}-{nh}-{trial}") % (2**31))
        state = reference.random_attention_weights(C, gen)
        # Two input distributions: standard normal, and uniform on [-1, 1].
        x = torch.randn(B, T, C, generator=gen) if trial % 2 == 0 else torch.rand(B, T, C, generator=gen) * 2 - 1
        expected = reference.attention(x.double(), reference.f64(state), nh)
        got = adapter.attention(x.clone(), state, nh)
        assert_close(got, expected, atol=1e-5, what=f"attention output (trial {trial})")


def test_attention_is_causal():
    B, T, C, nh = 2, 16, 32, 4
    gen = torch.Generator().manual_seed(seeded("attention-causal") % (2**31))
    state = reference.random_attention_weights(C, gen, scale=2.0)
    x = torch.randn(B, T, C, generator=gen)
    base = adapter.attention(x.clone(), state, nh)
    for t in (1, 5, T - 1):
        changed = x.clone()
        changed[:, t:] = torch.randn(B, T - t, C, generator=gen) * 5
        out = adapter.attention(changed, state, nh)
        assert torch.allclose(out[:, :t], base[:, :t], atol=1e-6, rtol=0), (
            f"changing tokens {t}.. changed the outputs at earlier positions: position s may only attend to <= s")
        assert not torch.allclose(out[:, t:], base[:, t:]), "outputs at the changed positions must change"
