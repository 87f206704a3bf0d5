"""Part `generation`: generate() is deterministic under a seed, adds exactly
max_new_tokens, honours temperature and top_k, and after the training part
most generated words (of two letters or more, sampled at temperature 0.6,
top_k 10) are words of the corpus."""

from __future__ import annotations

import re

import pytest
import torch

import adapter
import reference
from roadmap_cli.grading_kit import seeded

CFG = dict(vocab_size=12, block_size=8, n_layer=1, n_head=2, n_embd=16)
READABLE_FRACTION = 0.5


@pytest.fixture(scope="module")
def weights():
    gen = torch.Generator().manual_seed(seeded("generation-weights") % (2**31))
    state = reference.random_gpt_weights(CFG["vocab_size"], CFG["block_size"], CFG["n_layer"], CFG["n_embd"], gen)
    state["transformer.wte.weight"].mul_(3)  # logits of a readable scale
    return state


@pytest.fixture()
def model(weights):
    return adapter.gpt_model(weights, **CFG)


def _last_logits(weights, idx):
    logits, _ = reference.gpt(idx[:, -CFG["block_size"]:], weights, CFG["n_layer"], CFG["n_head"])
    return logits[:, -1, :]


def test_generate_appends_exactly_max_new_tokens(model):
    idx = torch.tensor([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])
    for n in (0, 1, 7, 20):  # 20 > block_size: the context must be cropped to the last block_size tokens
        out = adapter.generate(model, idx.clone(), n)
        assert tuple(out.shape) == (2, 5 + n), f"max_new_tokens={n}: shape {tuple(out.shape)}, expected (2, {5 + n})"
        assert torch.equal(out[:, :5], idx), "the prompt must be kept at the start of the output"
        assert int(out.min()) >= 0 and int(out.max()) < CFG["vocab_size"]


def test_generate_is_deterministic_under_a_seed(model):
    idx = torch.tensor([[3, 1, 4]])
    seed = seeded("generation-seed") % (2**31)
    torch.manual_seed(seed)
    a = adapter.generate(model, idx.clone(), 30, temperature=1.5)
    torch.manual_seed(seed)
    b = adapter.generate(model, idx.clone(), 30, temperature=1.5)
    torch.manual_seed(seed + 1)
    c = adapter.generate(model, idx.clone(), 30, temperature=1.5)
    assert torch.equal(a, b), "the same torch.manual_seed must give the same text"
    assert not torch.equal(a, c), "a different seed should give different text at temperature 1.5"


def test_top_k_1_is_greedy_decoding(model, weights):
    idx = torch.tensor([[1, 5, 9, 2, 7, 3, 3, 8, 0, 4, 6]])  # longer than block_size
    out = adapter.generate(model, idx.clone(), 10, temperature=1.0, top_k=1)
    expected = idx.clone()
    for _ in range(10):
        nxt = _last_logits(weights, expected).argmax(-1, keepdim=True)
        expected = torch.cat([expected, nxt], dim=1)
    assert torch.equal(out, expected), "top_k=1 must always pick the most likely token"


def test_top_k_samples_only_among_the_k_likeliest(model, weights):
    B, k = 400, 3
    idx = torch.tensor([[2, 7, 1]]).repeat(B, 1)
    torch.manual_seed(seeded("generation-topk") % (2**31))
    out = adapter.generate(model, idx.clone(), 1, temperature=2.0, top_k=k)
    allowed = set(torch.topk(_last_logits(weights, idx[:1]), k, dim=-1).indices[0].tolist())
    sampled = set(out[:, -1].tolist())
    assert sampled <= allowed, f"top_k={k} sampled tokens {sorted(sampled - allowed)} outside the top {k}"
    assert len(sampled) >= 2, "top_k=3 at temperature 2 should still sample more than one token"


def _tv(p: torch.Tensor, q: torch.Tensor) -> float:
    return 0.5 * float((p - q).abs().sum())


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_temperature_rescales_the_distribution(model, weights, temperature):
    B = 4000
    # Among a few prompts, use the one where temperature changes the distribution most, so
    # the test can tell "divided by temperature" from "ignored the temperature".
    gen = torch.Generator().manual_seed(seeded("generation-temperature-prompts") % (2**31))
    prompts = torch.randint(CFG["vocab_size"], (16, 4), generator=gen)
    logits = _last_logits(weights, prompts)  # (16, V)
    gaps = [_tv(torch.softmax(row / temperature, -1), torch.softmax(row, -1)) for row in logits]
    best = max(range(len(gaps)), key=gaps.__getitem__)
    assert gaps[best] > 0.15, "test is too weak: temperature barely changes the distribution"
    want = torch.softmax(logits[best] / temperature, -1)
    idx = prompts[best : best + 1].repeat(B, 1)
    torch.manual_seed(seeded(f"generation-temperature-{temperature}") % (2**31))
    out = adapter.generate(model, idx.clone(), 1, temperature=temperature)
    got = torch.bincount(out[:, -1], minlength=CFG["vocab_size"]).float() / B
    tv = _tv(got, want)
    assert tv < 0.06, f"sampled distribution is {tv:.3f} (total variation) away from softmax(logits / {temperature})"


def test_trained_model_writes_corpus_words(trained, corpus_text, perf):
    result, _, _, _, _ = trained
    vocab = reference.char_vocab(corpus_text)
    stoi = {c: i for i, c in enumerate(vocab)}
    model = result.model.eval()
    device = next(model.parameters()).device
    torch.manual_seed(seeded("generation-readable") % (2**31))
    prompt = torch.full((8, 1), stoi["\n"], device=device)
    out = adapter.generate(model, prompt, 150, temperature=0.6, top_k=10)  # 8 samples of 150 characters
    text = "\n".join("".join(vocab[i] for i in row) for row in out.tolist())
    known = {w.lower() for w in re.findall(r"[A-Za-z]+", corpus_text)}
    words = [w for w in re.findall(r"[A-Za-z]+", text) if len(w) >= 2]  # single letters are too easy
    assert len(words) >= 60, f"only {len(words)} words in 1200 generated characters: {text[:200]!r}"
    fraction = sum(w.lower() in known for w in words) / len(words)
    perf("corpus_word_fraction", fraction, "fraction", threshold=READABLE_FRACTION)
    assert fraction >= READABLE_FRACTION, (
        f"{fraction:.0%} of generated words occur in the corpus (need {READABLE_FRACTION:.0%}): {text[:300]!r}")
