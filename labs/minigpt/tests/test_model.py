"""Part `model`: LayerNorm, the pre-norm block and the whole GPT equal the
reference within 1e-4 with fixed weights; parameter names and count are right."""

from __future__ import annotations

import pytest
import torch

import adapter
import reference
from roadmap_cli.grading_kit import assert_close, seeded

CFG = dict(vocab_size=50, block_size=24, n_layer=2, n_head=4, n_embd=32)


def _gen(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(seeded(name) % (2**31))


@pytest.mark.parametrize("scale", [1.0, 0.01, 0.002])
def test_layer_norm_matches_reference(scale):
    # Small-variance rows (as right after initialisation) are where eps matters.
    gen = _gen(f"layernorm-{scale}")
    C = 32
    x = torch.randn(3, 5, C, generator=gen) * scale + 0.5
    w, b = 1 + 0.3 * torch.randn(C, generator=gen), 0.2 * torch.randn(C, generator=gen)
    assert_close(adapter.layer_norm(x, w, b), reference.layer_norm(x.double(), w.double(), b.double()), atol=1e-4,
                 what="LayerNorm output")


def test_layer_norm_of_a_constant_row_is_finite():
    C = 16
    x = torch.full((1, 2, C), 3.0)
    w, b = torch.ones(C), torch.linspace(-1, 1, C)
    out = adapter.layer_norm(x, w, b)
    assert torch.isfinite(out).all(), "a constant row has variance 0: add eps inside the square root"
    assert_close(out, reference.layer_norm(x, w, b), atol=1e-4, what="LayerNorm of a constant row")


@pytest.mark.parametrize("T", [1, 9, 24])
def test_block_matches_reference(T):
    for trial in range(3):
        gen = _gen(f"block-{T}-{trial}")
        C, nh = 32, 4
        state = reference.random_block_weights(C, gen)
        x = torch.randn(2, T, C, generator=gen)
        assert_close(adapter.block(x.clone(), state, nh), reference.block(x.double(), reference.f64(state), nh), atol=1e-4,
                     what=f"Block output (trial {trial})")


def test_parameter_names_follow_the_handout():
    model = adapter.new_gpt(**CFG)
    names = set(model.state_dict().keys())
    expected = reference.expected_keys(CFG["n_layer"])
    assert names == expected, f"missing {sorted(expected - names)}, unexpected {sorted(names - expected)}"


def test_parameter_count_matches_the_formula():
    for cfg in (CFG, dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)):
        model = adapter.new_gpt(**cfg)
        got = sum(p.numel() for p in model.parameters())
        want = reference.param_count(cfg["vocab_size"], cfg["block_size"], cfg["n_layer"], cfg["n_embd"])
        assert got == want, f"{got} parameters, the formula gives {want} (is lm_head tied to wte?)"


@pytest.mark.parametrize("T", [1, 13, 24])
def test_gpt_logits_and_loss_match_reference(T):
    for trial in range(3):
        gen = _gen(f"gpt-{T}-{trial}")
        state = reference.random_gpt_weights(CFG["vocab_size"], CFG["block_size"], CFG["n_layer"], CFG["n_embd"], gen)
        model = adapter.gpt_model(state, **CFG)
        idx = torch.randint(CFG["vocab_size"], (3, T), generator=gen)
        targets = torch.randint(CFG["vocab_size"], (3, T), generator=gen)
        ref_logits, ref_loss = reference.gpt(idx, reference.f64(state), CFG["n_layer"], CFG["n_head"], targets)
        logits, loss = adapter.forward(model, idx.clone(), targets.clone())
        assert_close(logits, ref_logits, atol=1e-4, what=f"GPT logits (trial {trial})")
        assert loss is not None and loss.dim() == 0, "loss must be a scalar tensor when targets are given"
        assert abs(float(loss) - float(ref_loss)) <= 1e-4, f"loss {float(loss):.6f} != reference {float(ref_loss):.6f}"
        logits_only, no_loss = adapter.forward(model, idx.clone())
        assert no_loss is None, "without targets the loss must be None"
        assert_close(logits_only, ref_logits, atol=1e-4, what="GPT logits without targets")


def test_positions_matter():
    # The same token at different positions must get different logits (position embeddings).
    gen = _gen("gpt-positions")
    state = reference.random_gpt_weights(CFG["vocab_size"], CFG["block_size"], CFG["n_layer"], CFG["n_embd"], gen)
    model = adapter.gpt_model(state, **CFG)
    idx = torch.full((1, 6), 7)
    logits, _ = adapter.forward(model, idx)
    ref_logits, _ = reference.gpt(idx, reference.f64(state), CFG["n_layer"], CFG["n_head"])
    assert_close(logits, ref_logits, atol=1e-4, what="logits of a repeated token")
