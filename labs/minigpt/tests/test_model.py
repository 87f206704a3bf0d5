"""Part `model`: LayerNorm, the pre-norm block and the whole GPT equal the
reference within 1e-4 with fixed weights; parameter names and count are right;
all of it with biases (GPT-2's layout) and without (GPTConfig(bias=False))."""

from __future__ import annotations

import pytest
import torch

import adapter
import ref_model
import reference
from roadmap_cli.grading_kit import assert_close, seeded

CFG = dict(vocab_size=50, block_size=24, n_layer=2, n_head=4, n_embd=32)


def _gen(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(seeded(name) % (2**31))


SECTION = "README.md, section"


@pytest.mark.parametrize("scale", [1.0, 0.01, 0.002])
def test_layer_norm_matches_reference(scale):
    # Small-variance rows (as right after initialisation) are where eps matters.
    gen = _gen(f"layernorm-{scale}")
    C = 32
    x = torch.randn(3, 5, C, generator=gen) * scale + 0.5
    w, b = 1 + 0.3 * torch.randn(C, generator=gen), 0.2 * torch.randn(C, generator=gen)
    assert_close(adapter.layer_norm(x, w, b), reference.layer_norm(x.double(), w.double(), b.double()), atol=1e-4,
                 what=f"LayerNorm output, rows with std {scale} ({SECTION} 3.1)")


def test_layer_norm_of_a_non_contiguous_2d_input():
    gen = _gen("layernorm-strided")
    C = 24
    x = torch.randn(C, 7, generator=gen).t() * 3 - 1  # (7, C), a transposed view
    w, b = 1 + 0.3 * torch.randn(C, generator=gen), 0.2 * torch.randn(C, generator=gen)
    assert_close(adapter.layer_norm(x, w, b), reference.layer_norm(x.double(), w.double(), b.double()), atol=1e-4,
                 what=f"LayerNorm of a non-contiguous (7, C) input: normalise over the LAST dimension ({SECTION} 3.1)")


@pytest.mark.parametrize("scale", [1.0, 0.01])
def test_layer_norm_without_bias(scale):
    """LayerNorm(C, bias=False): no bias parameter (self.bias is None) and no shift."""
    gen = _gen(f"layernorm-nobias-{scale}")
    C = 32
    x = torch.randn(2, 7, C, generator=gen) * scale - 0.3
    w = 1 + 0.3 * torch.randn(C, generator=gen)
    assert_close(adapter.layer_norm(x, w, None), reference.layer_norm(x.double(), w.double(), None), atol=1e-4,
                 what=f"LayerNorm(C, bias=False) output, rows with std {scale}: (x - mean) / sqrt(var + eps) * "
                      f"weight, no shift when self.bias is None ({SECTION} 3.1, 4.3)")


def test_layer_norm_of_a_constant_row_is_finite():
    C = 16
    x = torch.full((1, 2, C), 3.0)
    w, b = torch.ones(C), torch.linspace(-1, 1, C)
    out = adapter.layer_norm(x, w, b)
    assert torch.isfinite(out).all(), f"a constant row has variance 0: add eps inside the square root ({SECTION} 3.1)"
    assert_close(out, reference.layer_norm(x, w, b), atol=1e-4, what=f"LayerNorm of a constant row ({SECTION} 3.1)")


@pytest.mark.parametrize("T", [1, 9, 24])
def test_block_matches_reference(T):
    for trial in range(3):
        gen = _gen(f"block-{T}-{trial}")
        C, nh = 32, 4
        state = reference.random_block_weights(C, gen)
        x = torch.randn(2, T, C, generator=gen)
        got = adapter.block(x.clone(), state, nh, dropout=0.2 if trial == 1 else 0.0)  # eval mode: no dropout
        assert_close(got, reference.block(x.double(), reference.f64(state), nh), atol=1e-4,
                     what=f"Block output, T = {T}, trial {trial} ({SECTION} 3.4)")


@pytest.mark.parametrize("bias", [True, False])
def test_parameter_names_follow_the_handout(bias):
    facts = adapter.parameter_facts(**CFG, bias=bias)
    names = set(facts["names"])
    expected = reference.expected_keys(CFG["n_layer"], bias)
    assert names == expected, (f"parameter names of GPT(GPTConfig(bias={bias})): missing {sorted(expected - names)}, "
                               f"unexpected {sorted(names - expected)} ({SECTION} 4, 'Parameter names', and 4.3)")


@pytest.mark.parametrize("bias", [True, False])
def test_parameter_count_matches_the_formula(bias):
    for cfg in (CFG, dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)):
        facts = adapter.parameter_facts(**cfg, bias=bias)
        want = reference.param_count(cfg["vocab_size"], cfg["block_size"], cfg["n_layer"], cfg["n_embd"], bias)
        tensors = len(reference.expected_keys(cfg["n_layer"], bias)) - 1  # the tied matrix once
        formula = "n_layer * (12*C^2 + 13*C) + 2*C" if bias else "n_layer * (12*C^2 + 2*C) + C"
        assert facts["tied"], f"lm_head.weight must BE transformer.wte.weight (the same Parameter) ({SECTION} 4)"
        assert facts["count"] == want, (f"parameter count of GPT(bias={bias}) for {cfg}: expected {want} "
                                        f"(V*C + block_size*C + {formula}), got {facts['count']} "
                                        f"({SECTION} 4, 'Parameter names', and 4.3)")
        assert facts["tensors"] == tensors, (f"parameter tensors of GPT(bias={bias}) for {cfg}: expected {tensors}, "
                                             f"got {facts['tensors']} ({SECTION} 4.3)")


def _random_gpt(name: str):
    gen = _gen(name)
    return gen, reference.random_gpt_weights(CFG["vocab_size"], CFG["block_size"], CFG["n_layer"], CFG["n_embd"], gen)


@pytest.mark.parametrize("T", [1, 13, 24])
def test_gpt_logits_and_loss_match_reference(T):
    for trial in range(3):
        gen, state = _random_gpt(f"gpt-{T}-{trial}")
        idx = torch.randint(CFG["vocab_size"], (3, T), generator=gen)
        targets = torch.randint(CFG["vocab_size"], (3, T), generator=gen)
        if trial == 1:  # non-contiguous ids (a transposed view)
            idx, targets = idx.t().contiguous().t(), targets.t().contiguous().t()
        ref_logits, ref_loss = reference.gpt(idx, reference.f64(state), CFG["n_layer"], CFG["n_head"], targets)
        cfg = dict(CFG, dropout=0.2 if trial == 2 else 0.0)  # eval mode: dropout must do nothing
        logits, loss = adapter.forward(state, cfg, idx.clone(), targets.clone())
        assert_close(logits, ref_logits, atol=1e-4, what=f"GPT logits, T = {T}, trial {trial} ({SECTION} 4)")
        assert loss is not None and loss.dim() == 0, f"loss must be a scalar tensor when targets are given ({SECTION} 4)"
        assert abs(float(loss) - float(ref_loss)) <= 1e-4, (
            f"loss {float(loss):.6f}, expected {float(ref_loss):.6f}: the mean cross-entropy over all B*T positions "
            f"({SECTION} 4)")
        logits_only, no_loss = adapter.forward(state, cfg, idx.clone())
        assert no_loss is None, f"without targets the loss must be None ({SECTION} 4)"
        assert_close(logits_only, ref_logits, atol=1e-4, what=f"GPT logits without targets ({SECTION} 4)")


@pytest.mark.parametrize("fused", [False, True])
def test_gpt_without_biases_matches_reference(fused):
    """GPTConfig(bias=False): no bias anywhere; the same weights otherwise give the reference's
    bias-free logits, on the written-out path and on the fused one."""
    gen, state = _random_gpt(f"gpt-nobias-{fused}")
    state = reference.without_biases(state)
    idx = torch.randint(CFG["vocab_size"], (2, 19), generator=gen)
    targets = torch.randint(CFG["vocab_size"], (2, 19), generator=gen)
    ref_logits, ref_loss = reference.gpt(idx, reference.f64(state), CFG["n_layer"], CFG["n_head"], targets)
    logits, loss = adapter.forward(state, dict(CFG, bias=False), idx, targets, fused=fused)
    path = "fused" if fused else "written-out"
    assert_close(logits, ref_logits, atol=1e-4, what=f"GPT(bias=False) logits, {path} path ({SECTION} 4, 4.3)")
    assert loss is not None and abs(float(loss) - float(ref_loss)) <= 1e-4, (
        f"GPT(bias=False) loss on the {path} path: expected {float(ref_loss):.6f}, got "
        f"{None if loss is None else round(float(loss), 6)} ({SECTION} 4, 4.3)")


def test_block_without_biases_matches_reference():
    gen = _gen("block-nobias")
    C, nh = 32, 4
    state = reference.without_biases(reference.random_block_weights(C, gen))
    x = torch.randn(2, 11, C, generator=gen)
    assert_close(adapter.block(x.clone(), state, nh, bias=False), reference.block(x.double(), reference.f64(state), nh),
                 atol=1e-4, what=f"Block(bias=False) output: no bias in c_attn, c_proj, c_fc, ln_1, ln_2 ({SECTION} 3.4, 4.3)")


def test_a_sequence_longer_than_block_size_is_refused():
    _, state = _random_gpt("gpt-too-long")
    with pytest.raises(ValueError):
        adapter.forward(state, CFG, torch.zeros(1, CFG["block_size"] + 1, dtype=torch.long))


def test_positions_matter():
    # The same token at different positions must get different logits (position embeddings).
    _, state = _random_gpt("gpt-positions")
    idx = torch.full((1, 6), 7)
    logits, _ = adapter.forward(state, CFG, idx)
    ref_logits, _ = reference.gpt(idx, reference.f64(state), CFG["n_layer"], CFG["n_head"])
    assert_close(logits, ref_logits, atol=1e-4, what=f"logits of a repeated token: add wpe(arange(T)) ({SECTION} 4)")


def test_dropout_in_train_mode_where_the_handout_puts_it():
    p = 0.25
    gen, state = _random_gpt("gpt-dropout")
    idx = torch.randint(CFG["vocab_size"], (2, 11), generator=gen)
    seed = int(seeded("gpt-dropout-seed") % (2**31))
    got, _ = adapter.forward(state, dict(CFG, dropout=p), idx, train_seed=seed)
    ref = ref_model.GPT(ref_model.GPTConfig(**CFG, dropout=p))
    ref.load_state_dict(state)
    ref.train()
    torch.manual_seed(seed)
    with torch.no_grad():
        want, _ = ref(idx)
        plain, _ = ref.eval()(idx)
    assert not torch.allclose(got, plain, atol=1e-4), (
        f"in train mode with dropout={p} the logits equal the eval-mode logits: dropout is never applied ({SECTION} 4)")
    assert_close(got, want, atol=1e-4, what=(
        f"GPT logits in train mode with dropout={p} after torch.manual_seed: dropout after tok + pos, on the "
        f"attention weights, after attention's c_proj and after the MLP, in that order ({SECTION} 3.2-3.4, 4)"))


@pytest.mark.parametrize("bias", [True, False])
def test_fused_path_agrees_with_the_written_out_path(bias):
    """GPTConfig(fused=True) switches to F.layer_norm and F.scaled_dot_product_attention (README.md,
    section 4.2): the same weights must give the same logits as the written-out path, with
    biases and without (bias=False: F.layer_norm gets bias=None)."""
    gen, state = _random_gpt(f"gpt-fused-{bias}")
    if not bias:
        state = reference.without_biases(state)
    idx = torch.randint(CFG["vocab_size"], (3, 17), generator=gen)
    cfg = dict(CFG, bias=bias)
    written, _ = adapter.forward(state, cfg, idx, fused=False)
    fused, _ = adapter.forward(state, cfg, idx, fused=True)
    assert_close(fused, written, atol=1e-4,
                 what=f"logits of the fused path (expected: the written-out path's), bias={bias} ({SECTION} 4.2)")
