"""The block manager: a pool of fixed-size KV blocks shared by all sequences.

Why paging? If every request reserved room for its maximum length, most of
that room would sit empty (a chat reply of 40 tokens in a slot sized for 2048).
Instead the KV cache is cut into blocks of `block_size` token slots; each
sequence owns a *block table* (a list of block ids) and takes a new block only
when its last one is full. Waste is at most `block_size - 1` slots per sequence.

Three ideas live here (README.md, sections "Block tables", "Reference counts and
copy-on-write", "Prefix caching"):

1. Block tables. Token i of a sequence lives in block `table[i // block_size]`
   at offset `i % block_size`.
2. Reference counts. A block may appear in several tables (a forked sequence,
   a shared prompt prefix). `ref_count` = number of tables holding it; the block
   is free again only when it drops to 0. Writing into a shared block would
   corrupt the other sequences, so the writer first copies it (copy-on-write).
3. Prefix caching. A *full* block is identified by a hash of its tokens chained
   with the hash of the block before it, so equal hashes mean equal prefixes,
   not merely equal blocks. A new request reuses the longest run of cached
   full blocks. Freed blocks keep their hash and stay reusable until the pool
   needs them: the free list is an LRU queue (front = freed longest ago =
   evicted first); a sequence frees its blocks tail-first, so the end of a
   prompt is evicted before its beginning.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Optional, Sequence


def compute_block_hash(parent_hash: Optional[int], token_ids: Sequence[int]) -> int:
    """Hash of one full block: its tokens chained with the previous block's hash.

    `parent_hash` is None for a sequence's first block. Chaining is what makes
    a hit mean "the whole prefix up to here is equal".
    """
    raise NotImplementedError("compute_block_hash: see README.md, section \"Prefix caching\"")


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    hash: Optional[int] = None  # set only while the block is full and cached


@dataclass
class _SeqState:
    block_table: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)  # tokens that own a KV slot


class BlockManager:
    """Owns `num_blocks` blocks of `block_size` slots; see the module docstring."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        # LRU order: the front is taken first. Initially every block, by id.
        self._free: deque[int] = deque(range(num_blocks))
        self._hash_to_block: dict[int, int] = {}
        self._seqs: dict[int, _SeqState] = {}

    # ------------------------------------------------------------ inspection

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def free_block_ids(self) -> list[int]:
        """Free blocks in eviction order (index 0 is the next one taken)."""
        return list(self._free)

    def ref_count(self, block_id: int) -> int:
        return self.blocks[block_id].ref_count

    def block_hash(self, block_id: int) -> Optional[int]:
        return self.blocks[block_id].hash

    def block_table(self, seq_id: int) -> list[int]:
        return list(self._seqs[seq_id].block_table)

    def num_tokens(self, seq_id: int) -> int:
        return len(self._seqs[seq_id].token_ids)

    def has_seq(self, seq_id: int) -> bool:
        return seq_id in self._seqs

    # ------------------------------------------------------------ helpers

    def _blocks_needed(self, num_tokens: int) -> int:
        return (num_tokens + self.block_size - 1) // self.block_size

    def _take_free_block(self) -> int:
        """Pop the least recently freed block; if it was cached, evict it."""
        raise NotImplementedError("_take_free_block: see README.md, section \"Eviction\"")

    def _register_full_block(self, block_id: int, parent_hash: Optional[int], tokens: Sequence[int]) -> None:
        raise NotImplementedError("_register_full_block: see README.md, section \"Prefix caching\"")

    # ------------------------------------------------------------ operations

    def can_allocate(self, token_ids: Sequence[int]) -> bool:
        """Conservative: enough free blocks even if nothing is a cache hit."""
        raise NotImplementedError("can_allocate: see README.md, section \"The block manager API\"")

    def allocate(self, seq_id: int, token_ids: Sequence[int]) -> int:
        """Give a new sequence blocks for its prompt; return the number of
        prompt tokens whose KV is already cached (hits x block_size)."""
        raise NotImplementedError("allocate: see README.md, section \"Prefix caching\"")

    def can_append(self, seq_id: int) -> bool:
        """Can one more token get a slot? Needs a free block if the last block
        is full (new block) or shared (copy-on-write)."""
        raise NotImplementedError("can_append: see README.md, section \"Reference counts and copy-on-write\"")

    def append(self, seq_id: int, token_id: int) -> Optional[tuple[int, int]]:
        """Give `token_id` a slot at the end of the sequence.

        Returns a (src_block, dst_block) pair when copy-on-write happened: the
        caller must copy the KV of block src into block dst before writing.
        """
        raise NotImplementedError("append: see README.md, section \"Reference counts and copy-on-write\"")

    def fork(self, parent_id: int, child_id: int) -> None:
        """The child shares every block of the parent (no copy until a write)."""
        raise NotImplementedError("fork: see README.md, section \"Reference counts and copy-on-write\"")

    def free(self, seq_id: int) -> None:
        """Release a sequence's blocks, tail-first, so the end of a prefix is
        evicted before its beginning. Blocks keep their hash (still cached)."""
        raise NotImplementedError("free: see README.md, section \"Eviction\"")
