"""The grader's own references (never copied to the workspace).

- `gather_then_attend`: paged attention done the obvious way, in fp32 (or fp64).
- `decode_contiguous`: one request decoded alone with a plain contiguous KV
  cache (a growing tensor per layer), greedy. The engine must reproduce it.
- `BlockTracker`: what the grader knows about every block's contents, so it can
  say which prefix hits a request *should* get without trusting the learner's
  hash function.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch


def gather_then_attend(query, key_cache, value_cache, block_tables, context_lens, scale):
    num_seqs, num_heads, _ = query.shape
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    wide = torch.promote_types(query.dtype, torch.float32)
    out = torch.empty(query.shape, dtype=wide)
    for s in range(num_seqs):
        n = int(context_lens[s])
        pos = torch.arange(n)
        blocks = block_tables[s, pos // block_size].long()
        k = key_cache[blocks, pos % block_size].to(wide).repeat_interleave(group, dim=1)  # (n, H, D)
        v = value_cache[blocks, pos % block_size].to(wide).repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,nhd->hn", query[s].to(wide), k) * scale
        out[s] = torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1), v)
    return out


def _contiguous_attend(model, caches):
    """attend() over a contiguous per-layer cache: append this step's K/V, then
    causal attention of the new queries over everything cached so far."""
    c = model.config
    group = c.n_heads // c.n_kv_heads

    def attend(layer, q, k, v, positions):
        ks, vs = caches[layer]
        ks = torch.cat([ks, k]) if ks is not None else k
        vs = torch.cat([vs, v]) if vs is not None else v
        caches[layer] = (ks, vs)
        kk = ks.repeat_interleave(group, dim=1)                     # (N, H, D)
        vv = vs.repeat_interleave(group, dim=1)
        scores = torch.einsum("thd,nhd->htn", q, kk) * model.scale   # (H, T, N)
        key_pos = torch.arange(ks.shape[0])
        scores = scores.masked_fill(key_pos[None, None, :] > positions[None, :, None], float("-inf"))
        return torch.einsum("htn,nhd->thd", torch.softmax(scores, dim=-1), vv)

    return attend


def decode_contiguous(model, prompt: Sequence[int], max_tokens: int) -> list[int]:
    caches = [(None, None) for _ in range(model.config.n_layers)]
    attend = _contiguous_attend(model, caches)
    tokens = torch.tensor(list(prompt), dtype=torch.long)
    positions = torch.arange(len(prompt))
    out: list[int] = []
    while len(out) < max_tokens:
        logits = model.forward(tokens, positions, attend)
        nxt = int(torch.argmax(logits[-1]))
        out.append(nxt)
        positions = torch.tensor([int(positions[-1]) + 1])
        tokens = torch.tensor([nxt])
    return out


class BlockTracker:
    """Grader-side record of which full prefix each block holds.

    content[block] = the tuple of ALL tokens from position 0 through the end of
    that block (full blocks only). A request's block i can be a prefix-cache hit
    exactly when a still-cached block holds its tokens[: (i+1)*bs]. This mirrors
    the handout's rules without using the learner's hash: registering a prefix
    points it at the newest block; evicting a block forgets the prefix only if
    it still points at that block.
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.content: dict[int, tuple] = {}
        self.by_prefix: dict[tuple, int] = {}

    def forget(self, block_id: int) -> None:
        prefix = self.content.pop(block_id, None)
        if prefix is not None and self.by_prefix.get(prefix) == block_id:
            del self.by_prefix[prefix]

    def record_full(self, block_id: int, prefix: Sequence[int]) -> None:
        self.forget(block_id)
        self.content[block_id] = tuple(prefix)
        self.by_prefix[tuple(prefix)] = block_id

    def holder(self, prefix: Sequence[int]) -> Optional[int]:
        return self.by_prefix.get(tuple(prefix))

    def expected_hits(self, tokens: Sequence[int]) -> int:
        hits = 0
        for i in range(len(tokens) // self.block_size):
            if self.holder(tokens[: (i + 1) * self.block_size]) is None:
                break
            hits += 1
        return hits
