"""Part 5: reading vLLM's C++ launchers. Each function answers one question
about the code quoted in README.md (section "Part 5") with plain numbers.

All sizes are in elements unless the name says bytes; floats are 4 bytes.
"""

from __future__ import annotations

WARP_SIZE = 32
PARTITION_SIZE = 512  # paged_attention_v2 splits each sequence into 512-token partitions
FLOAT_BYTES = 4


def divide_round_up(a: int, b: int) -> int:
    """vLLM's DIVIDE_ROUND_UP(a, b) macro."""
    return -(-a // b)


def paged_attention_launch(version: int, num_seqs: int, num_heads: int, head_size: int, max_seq_len: int,
                           block_size: int, num_threads: int = 128) -> dict:
    """Launch configuration of paged_attention_v1 (version=1) or _v2 (version=2).

    Returns {"grid": (x, y, z), "block": (x, y, z), "shared_mem_bytes": int};
    for version 2 also "reduce_grid", "reduce_block", "reduce_shared_mem_bytes".
    """
    # BEGIN SOLUTION
    num_warps = num_threads // WARP_SIZE
    outputs_size = (num_warps // 2) * head_size * FLOAT_BYTES
    if version == 1:
        padded_max_seq_len = divide_round_up(max_seq_len, block_size) * block_size
        logits_size = padded_max_seq_len * FLOAT_BYTES
        return {"grid": (num_heads, num_seqs, 1), "block": (num_threads, 1, 1),
                "shared_mem_bytes": max(logits_size, outputs_size)}
    if version == 2:
        max_num_partitions = divide_round_up(max_seq_len, PARTITION_SIZE)
        logits_size = PARTITION_SIZE * FLOAT_BYTES
        return {"grid": (num_heads, num_seqs, max_num_partitions), "block": (num_threads, 1, 1),
                "shared_mem_bytes": max(logits_size, outputs_size),
                "reduce_grid": (num_heads, num_seqs, 1), "reduce_block": (num_threads, 1, 1),
                "reduce_shared_mem_bytes": 2 * max_num_partitions * FLOAT_BYTES}
    raise ValueError(f"version must be 1 or 2, got {version}")
    # STARTER
    # raise NotImplementedError("paged_attention_launch: README.md, Part 5")
    # END SOLUTION


def use_v1(max_seq_len: int, num_seqs: int, num_heads: int) -> bool:
    """vLLM's Python-side choice between the v1 and v2 kernels."""
    # BEGIN SOLUTION
    max_num_partitions = divide_round_up(max_seq_len, PARTITION_SIZE)
    return max_seq_len <= 8192 and (max_num_partitions == 1 or num_seqs * num_heads > 512)
    # STARTER
    # raise NotImplementedError("use_v1: README.md, Part 5")
    # END SOLUTION


def slot_mapping(block_table: list, positions: list, block_size: int) -> list:
    """The slot of each token of ONE sequence: its block's physical id times
    block_size plus its offset inside the block. A position of -1 is padding
    and gets slot -1."""
    # BEGIN SOLUTION
    slots = []
    for pos in positions:
        if pos < 0:
            slots.append(-1)
        else:
            slots.append(block_table[pos // block_size] * block_size + pos % block_size)
    return slots
    # STARTER
    # raise NotImplementedError("slot_mapping: README.md, Part 5")
    # END SOLUTION


def cache_write_indices(slot: int, head: int, dim: int, num_heads: int, head_size: int, block_size: int,
                        x: int) -> tuple:
    """Where reshape_and_cache writes element `dim` of head `head` of a token
    stored at `slot`: flat indices into key_cache
    [num_blocks, num_heads, head_size // x, block_size, x] and value_cache
    [num_blocks, num_heads, head_size, block_size]. (None, None) for slot < 0."""
    # BEGIN SOLUTION
    if slot < 0:
        return (None, None)
    block_idx, block_offset = slot // block_size, slot % block_size
    x_idx, x_offset = dim // x, dim % x
    key = ((((block_idx * num_heads + head) * (head_size // x) + x_idx) * block_size + block_offset) * x + x_offset)
    value = ((block_idx * num_heads + head) * head_size + dim) * block_size + block_offset
    return (key, value)
    # STARTER
    # raise NotImplementedError("cache_write_indices: README.md, Part 5")
    # END SOLUTION


def reshape_and_cache_launch(num_tokens: int, num_heads: int, head_size: int) -> dict:
    """Grid and block of the reshape_and_cache launch."""
    # BEGIN SOLUTION
    return {"grid": (num_tokens, 1, 1), "block": (min(num_heads * head_size, 512), 1, 1)}
    # STARTER
    # raise NotImplementedError("reshape_and_cache_launch: README.md, Part 5")
    # END SOLUTION
