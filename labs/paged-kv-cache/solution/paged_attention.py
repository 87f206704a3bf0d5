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
    # BEGIN SOLUTION
    slots = []
    for pos in range(start, end):
        block_id = block_table[pos // block_size]
        slots.append(block_id * block_size + pos % block_size)
    return slots
    # STARTER
    # raise NotImplementedError("compute_slot_mapping: see README.md, section \"Block tables and slots\"")
    # END SOLUTION


def write_kv(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
             slot_mapping: torch.Tensor) -> None:
    """Store new tokens' keys/values in the cache, in place.

    key, value:   (num_tokens, num_kv_heads, head_dim)
    slot_mapping: (num_tokens,) int64; a negative slot means "do not store"
                  (padding, or a token whose KV is already cached).
    """
    # BEGIN SOLUTION
    block_size = key_cache.shape[1]
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    # Index (block, offset) rather than a flattened view: the caches need not be
    # contiguous, and an indexed assignment writes into their own storage whatever
    # the layout (a `reshape` of a non-contiguous cache would be a copy).
    blocks, offsets = slots // block_size, slots % block_size
    key_cache[blocks, offsets] = key[keep].to(key_cache.dtype)
    value_cache[blocks, offsets] = value[keep].to(value_cache.dtype)
    # STARTER
    # raise NotImplementedError("write_kv: see README.md, section \"Block tables and slots\"")
    # END SOLUTION


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
    # BEGIN SOLUTION
    num_seqs, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, _ = key_cache.shape
    group = num_heads // num_kv_heads
    compute_dtype = torch.promote_types(query.dtype, torch.float32)
    lens = context_lens.to(device=query.device, dtype=torch.long)
    max_len = int(lens.max()) if num_seqs else 0
    # Position p of every sequence lives in block block_tables[s, p // block_size]
    # at offset p % block_size. Pad every sequence to max_len and mask the tail.
    positions = torch.arange(max_len, device=query.device)                      # (L,)
    block_index = (positions // block_size).clamp(max=block_tables.shape[1] - 1)
    blocks = block_tables[:, block_index].long().clamp(0, num_blocks - 1)      # (S, L); padding -> any valid id
    offsets = (positions % block_size).expand(num_seqs, max_len)               # (S, L)
    k = key_cache[blocks, offsets].to(compute_dtype)                           # (S, L, num_kv_heads, D)
    v = value_cache[blocks, offsets].to(compute_dtype)
    # GQA: query head h reads kv head h // group, so view the query heads as
    # (num_kv_heads, group) and broadcast K/V over the group dimension.
    q = query.to(compute_dtype).view(num_seqs, num_kv_heads, group, head_dim)  # (S, KVH, G, D)
    scores = torch.einsum("skgd,slkd->skgl", q, k) * scale                     # (S, KVH, G, L)
    valid = positions[None, :] < lens[:, None]                                 # (S, L)
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("skgl,slkd->skgd", probs, v)                            # (S, KVH, G, D)
    return out.reshape(num_seqs, num_heads, head_dim).to(query.dtype)
    # STARTER
    # raise NotImplementedError("paged_attention: see README.md, section \"Paged attention\"")
    # END SOLUTION
