"""Part `attention`: causal multi-head self-attention, written out (no
scaled_dot_product_attention), equal to the reference within 1e-5 with fixed
weights, causal (changing future tokens never changes earlier outputs), with
dropout on the attention weights and the output only in train mode."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

import adapter
import reference
from roadmap_cli.grading_kit import assert_close, seeded

SECTION = "README.md, section 3.2"
# (B, T, C, n_head): a single token, odd lengths, one head, many heads.
SHAPES = [(1, 1, 8, 2), (2, 7, 16, 4), (3, 33, 32, 4), (2, 12, 24, 1), (1, 20, 48, 8)]
TRIALS = 5


def _gen(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(seeded(name) % (2**31))


@pytest.mark.parametrize("B,T,C,nh", SHAPES)
def test_attention_matches_reference(B, T, C, nh):
    for trial in range(TRIALS):
        gen = _gen(f"attention-{B}-{T}-{C}-{nh}-{trial}")
        state = reference.random_attention_weights(C, gen)
        # Two input distributions: standard normal, and uniform on [-1, 1].
        x = torch.randn(B, T, C, generator=gen) if trial % 2 == 0 else torch.rand(B, T, C, generator=gen) * 2 - 1
        expected = reference.attention(x.double(), reference.f64(state), nh)
        # Trial 1 runs a model built for a longer context (block_size > T), trial 2 with dropout set
        # (in eval mode it must do nothing).
        got = adapter.attention(x.clone(), state, nh, block_size=T + 5 if trial == 1 else None,
                                dropout=0.3 if trial == 2 else 0.0)
        assert_close(got, expected, atol=1e-5,
                     what=f"attention output, (B, T, C, n_head) = {(B, T, C, nh)}, trial {trial} ({SECTION})")


def test_attention_of_a_non_contiguous_input():
    B, T, C, nh = 2, 9, 16, 2
    gen = _gen("attention-strided")
    state = reference.random_attention_weights(C, gen)
    x = torch.randn(T, B, C, generator=gen).transpose(0, 1)  # (B, T, C) view with swapped strides
    assert_close(adapter.attention(x, state, nh), reference.attention(x.double(), reference.f64(state), nh), atol=1e-5,
                 what=f"attention output for a non-contiguous x ({SECTION})")


def test_attention_reads_the_mask_buffer_built_in_init():
    """The mask is `self.causal_mask[:T, :T]`, built once in __init__: swap that buffer for
    a banded one (each query sees itself and the two keys before it) and the output must
    follow it. A forward that builds its own triangle every time ignores the buffer."""
    B, T, C, nh, block_size = 2, 9, 16, 2, 12
    gen = _gen("attention-mask-buffer")
    state = reference.random_attention_weights(C, gen)
    x = torch.randn(B, T, C, generator=gen)
    full = torch.ones(block_size, block_size, dtype=torch.bool)
    banded = torch.tril(full) & torch.triu(full, diagonal=-2)  # s in t-2 .. t
    expected = reference.attention(x.double(), reference.f64(state), nh, mask=banded[:T, :T])
    got = adapter.attention(x.clone(), state, nh, block_size=block_size, mask_buffer=banded)
    assert_close(got, expected, atol=1e-5,
                 what=f"attention output with self.causal_mask replaced by a banded mask (each query sees keys "
                      f"t-2..t): forward must use the buffer built once in __init__, self.causal_mask[:T, :T], "
                      f"not a mask it builds again ({SECTION})")


def _attention_with_dropout(x, sd, nh, p):
    """The handout's order: softmax -> dropout(att) -> att @ v -> c_proj -> dropout."""
    B, T, C = x.shape
    q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2)
               for t in F.linear(x, sd["c_attn.weight"], sd["c_attn.bias"]).split(C, dim=2))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // nh)
    att = att.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf")).softmax(-1)
    y = (F.dropout(att, p, True) @ v).transpose(1, 2).reshape(B, T, C)
    return F.dropout(F.linear(y, sd["c_proj.weight"], sd["c_proj.bias"]), p, True)


def test_dropout_in_train_mode_where_the_handout_puts_it():
    B, T, C, nh, p = 2, 10, 16, 2, 0.3
    gen = _gen("attention-dropout")
    state = reference.random_attention_weights(C, gen)
    x = torch.randn(B, T, C, generator=gen)
    seed = int(seeded("attention-dropout-seed") % (2**31))
    got = adapter.attention(x.clone(), state, nh, dropout=p, train_seed=seed)
    torch.manual_seed(seed)
    want = _attention_with_dropout(x, state, nh, p)
    plain = reference.attention(x, state, nh)
    assert not torch.allclose(got, plain, atol=1e-4), (
        f"in train mode with dropout={p} the output equals the no-dropout output: apply self.attn_dropout to the "
        f"attention weights and self.resid_dropout to the output ({SECTION})")
    assert_close(got, want, atol=1e-5, what=(
        f"attention in train mode with dropout={p} after torch.manual_seed: dropout goes on the attention weights "
        f"(after the softmax) and on c_proj's output, in that order ({SECTION})"))


def test_attention_is_causal():
    B, T, C, nh = 2, 16, 32, 4
    gen = _gen("attention-causal")
    state = reference.random_attention_weights(C, gen, scale=2.0)
    x = torch.randn(B, T, C, generator=gen)
    base = adapter.attention(x.clone(), state, nh)
    for t in (1, 5, T - 1):
        changed = x.clone()
        changed[:, t:] = torch.randn(B, T - t, C, generator=gen) * 5
        out = adapter.attention(changed, state, nh)
        diff = float((out[:, :t] - base[:, :t]).abs().max())
        assert diff <= 1e-6, (
            f"changing tokens {t}.. changed the outputs at earlier positions by {diff:.2e}: position s may only "
            f"attend to keys <= s ({SECTION})")
        assert not torch.allclose(out[:, t:], base[:, t:]), f"outputs at the changed positions must change ({SECTION})"
