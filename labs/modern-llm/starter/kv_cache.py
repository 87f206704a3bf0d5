"""Part 4 — decoding with a KV cache, a batch of prompts of different lengths.

Without a cache, generating token t re-runs the model over all t tokens: the
work per step grows with the sequence. With a cache, each layer keeps the keys
and values it already computed; a decode step feeds ONE new token per
sequence and attends over the cached keys: O(1) new-token work per step
(README.md, "Part 4: KV cache decoding").

The model (given: `toy_model.py` here, the grader's own Llama-style model when
graded) calls, in each layer `i` of a forward over T new tokens,

    k_all, v_all = cache.update(i, k_new, v_new)   # k_new (B, KVH, T, d)

and attends its T queries over k_all/v_all (the last T of S positions, causal),
ignoring key positions where `mask` (B, S) is False.

Batches are LEFT-padded: prompts are aligned on the right, pad id 0 on the
left, `mask` False there; positions count real tokens only (each prompt's
first real token is position 0).
"""

from __future__ import annotations

import torch


class KVCache:
    """Keys and values of every layer, preallocated for max_len positions."""

    def __init__(self, n_layers: int, batch: int, n_kv_heads: int, head_dim: int, max_len: int,
                 dtype: torch.dtype = torch.float32) -> None:
        shape = (batch, n_kv_heads, max_len, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in range(n_layers)]
        self.lengths = [0] * n_layers
        self.max_len = max_len

    def update(self, layer: int, k_new: torch.Tensor, v_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append T new positions to layer `layer`; return its keys and values
        for every position so far: (B, KVH, length, d) each."""
        raise NotImplementedError("KVCache.update: see README.md, section \"Part 4: KV cache decoding\"")


def left_pad(prompts: list[list[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens (B, P), positions (B, P), mask (B, P)) for prompts aligned on the right."""
    raise NotImplementedError("left_pad: see README.md, section \"Part 4: KV cache decoding\"")


@torch.no_grad()
def generate(model, prompts: list[list[int]], max_new_tokens: int) -> dict:
    """Greedy decoding of every prompt at once with a KV cache: one forward
    over the padded prompts (prefill), then one forward per new token with
    T = 1. Returns {"tokens": (B, max_new_tokens) long, "logits": list of
    max_new_tokens tensors (B, vocab): the logits each token was picked from}."""
    raise NotImplementedError("generate: see README.md, section \"Part 4: KV cache decoding\"")
