"""Writing into and reading from a paged KV cache, in plain torch.

Cache layout (one tensor for keys, one for values, per layer):

    key_cache:   (num_blocks, block_size, num_kv_heads, head_dim)
    value_cache: (num_blocks, block_size, num_kv_heads, head_dim)

A *slot* is a flat index into the first two dimensions:
    slot = block_id * block_size + offset      (offset = position % block_size)
so `key_cache.view(-1, num_kv_heads, head_dim)[slot]` is one token's key.

Decoding attends one query per sequence over that sequence's cached tokens,
which are scattered over the blocks listed in its block table. With grouped-
query attention (GQA) several query heads share one KV head:
    kv_head = head // (num_heads // num_kv_heads)
"""

from __future__ import annotations

from typing import Sequence

import torch


def compute_slot_mapping(block_table: Sequence[int], start: int, end: int, block_size: int) -> list[int]:
    """Slots of token positions start, start+1, ..., end-1 of one sequence."""
    raise NotImplementedError("compute_slot_mapping: see README.md, section \"Block tables and slots\"")


def write_kv(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
             slot_mapping: torch.Tensor) -> None:
    """Store new tokens' keys/values in the cache, in place.

    key, value:   (num_tokens, num_kv_heads, head_dim)
    slot_mapping: (num_tokens,) int64; a negative slot means "do not store"
                  (padding, or a token whose KV is already cached).
    """
    raise NotImplementedError("write_kv: see README.md, section \"Block tables and slots\"")


def paged_attention(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                    block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """One query per sequence attending to its cached context (decode attention).

    query:        (num_seqs, num_heads, head_dim)
    key_cache:    (num_blocks, block_size, num_kv_heads, head_dim), same for value_cache
    block_tables: (num_seqs, max_blocks_per_seq) int; entries past a sequence's
                  last block are padding (any value) and must not be read
    context_lens: (num_seqs,) int; sequence s attends to its tokens 0..context_lens[s]-1
    returns:      (num_seqs, num_heads, head_dim) in query's dtype

    out[s, h] = softmax(scale * q[s, h] . K_s^T) @ V_s, computed in fp32 (or
    the query's dtype if that is wider), where K_s, V_s are the sequence's tokens
    gathered from the blocks, with kv head h // group.
    """
    raise NotImplementedError("paged_attention: see README.md, section \"Paged attention\"")
