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
    raise NotImplementedError("paged_attention_launch: README.md, Part 5")


def use_v1(max_seq_len: int, num_seqs: int, num_heads: int) -> bool:
    """vLLM's Python-side choice between the v1 and v2 kernels."""
    raise NotImplementedError("use_v1: README.md, Part 5")


def slot_mapping(block_table: list, positions: list, block_size: int) -> list:
    """The slot of each token of ONE sequence: its block's physical id times
    block_size plus its offset inside the block. A position of -1 is padding
    and gets slot -1."""
    raise NotImplementedError("slot_mapping: README.md, Part 5")


def cache_write_indices(slot: int, head: int, dim: int, num_heads: int, head_size: int, block_size: int,
                        x: int) -> tuple:
    """Where reshape_and_cache writes element `dim` of head `head` of a token
    stored at `slot`: flat indices into key_cache
    [num_blocks, num_heads, head_size // x, block_size, x] and value_cache
    [num_blocks, num_heads, head_size, block_size]. (None, None) for slot < 0."""
    raise NotImplementedError("cache_write_indices: README.md, Part 5")


def reshape_and_cache_launch(num_tokens: int, num_heads: int, head_size: int) -> dict:
    """Grid and block of the reshape_and_cache launch."""
    raise NotImplementedError("reshape_and_cache_launch: README.md, Part 5")
