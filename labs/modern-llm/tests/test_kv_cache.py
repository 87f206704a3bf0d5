"""Part 4: greedy decoding with a KV cache on the GRADER's Llama-style model
(RoPE, GQA): for a left-padded batch of prompts of different lengths, every
step's logits equal a full recomputation of that sequence alone (1e-5), tokens
equal, and each decode step feeds exactly one new token per sequence."""

from __future__ import annotations

import pytest
import torch

import adapter
import refs
from llama_model import TinyLlama

SECTION = "Part 4: KV cache decoding"


def _alone(model, prompt, new_tokens):
    """Full recomputation without a cache, one sequence: the logits that pick each token."""
    seq, logits = list(prompt), []
    with torch.no_grad():
        for _ in range(new_tokens):
            tokens = torch.tensor([seq])
            out = model(tokens, torch.arange(len(seq))[None])[0, -1]
            logits.append(out)
            seq.append(int(out.argmax()))
    return seq[len(prompt):], logits


def test_left_pad():
    tokens, positions, mask = adapter.left_pad([[5, 6, 7], [9], [3, 4]])
    assert tokens.tolist() == [[5, 6, 7], [0, 0, 9], [0, 3, 4]], f"left_pad tokens {tokens.tolist()}"
    assert mask.tolist() == [[True] * 3, [False, False, True], [False, True, True]], f"left_pad mask {mask.tolist()}"
    assert positions[mask].tolist() == [0, 1, 2, 0, 0, 1], (
        f"positions of real tokens {positions[mask].tolist()}: each prompt's first real token is position 0 "
        f"(README.md, section \"{SECTION}\")")
    assert positions.tolist() == [[0, 1, 2], [0, 0, 0], [0, 0, 1]], (
        f"left_pad positions {positions.tolist()}: cumsum(mask) - 1 clamped at 0, so padding is position 0 "
        f"(README.md, section \"{SECTION}\")")


def test_cache_update_returns_everything_so_far():
    g = torch.Generator().manual_seed(refs.rng("cache-update").randrange(2**62))
    k1, v1 = torch.randn(2, 3, 4, 8, generator=g), torch.randn(2, 3, 4, 8, generator=g)
    k2, v2 = torch.randn(2, 3, 1, 8, generator=g), torch.randn(2, 3, 1, 8, generator=g)
    out = adapter.cache_update(2, 2, 3, 8, 16, [(0, k1, v1), (1, k1 * 2, v1 * 2), (0, k2, v2)])
    assert torch.equal(out[0][0], k1) and torch.equal(out[1][1], v1 * 2), "update of an empty layer must return the new keys/values"
    assert torch.equal(out[2][0], torch.cat([k1, k2], 2)) and torch.equal(out[2][1], torch.cat([v1, v2], 2)), (
        f"second update of layer 0 must return all 5 positions (got {tuple(out[2][0].shape)}); layers are "
        f"independent (README.md, section \"{SECTION}\")")


@pytest.mark.parametrize("config", [dict(n_heads=6, n_kv_heads=2), dict(n_heads=4, n_kv_heads=4), dict(n_heads=6, n_kv_heads=1)],
                         ids=["gqa-3to1", "mha", "mqa"])
def test_cached_batch_equals_full_recompute(config):
    r = refs.rng(f"kv-{config['n_kv_heads']}")
    model = TinyLlama(dim=48, n_layers=2, theta=r.choice([500.0, 10000.0]), seed=r.randrange(2**31), **config).eval()
    prompts = [[r.randrange(1, 61) for _ in range(n)] for n in (r.randint(1, 3), r.randint(4, 9), r.randint(1, 9))]
    new_tokens = r.randint(3, 6)
    got = adapter.generate(model, prompts, new_tokens)
    assert tuple(got["tokens"].shape) == (len(prompts), new_tokens), f"tokens shape {tuple(got['tokens'].shape)}"
    assert len(got["logits"]) == new_tokens, f"{len(got['logits'])} logits tensors for {new_tokens} new tokens"
    for row, prompt in enumerate(prompts):
        want_tokens, want_logits = _alone(model, prompt, new_tokens)
        for step in range(new_tokens):
            err = float((got["logits"][step][row] - want_logits[step]).abs().max())
            assert err <= 1e-5, (
                f"prompt {row} (length {len(prompt)} of {[len(p) for p in prompts]}): logits at new token {step} "
                f"differ from recomputing the sequence alone by {err:.3g}: check padding mask, positions and what "
                f"the cache returns (README.md, section \"{SECTION}\")")
        assert got["tokens"][row].tolist() == want_tokens, f"prompt {row}: tokens {got['tokens'][row].tolist()} != {want_tokens}"
    calls = got["calls"]
    width = max(len(p) for p in prompts)
    assert len(calls) == new_tokens, f"{len(calls)} forwards for {new_tokens} tokens: one prefill, then one per new token"
    assert calls[0]["T"] == width, f"the prefill processed {calls[0]['T']} tokens, expected the padded width {width}"
    for i, call in enumerate(calls[1:], start=1):
        assert call["T"] == 1 and call["S"] == width + i, (
            f"decode step {i} processed T={call['T']} new tokens over S={call['S']} keys; expected T=1 over "
            f"{width + i}: feed only the new token and reuse the cache (README.md, section \"{SECTION}\")")
