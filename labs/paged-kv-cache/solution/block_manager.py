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
    # BEGIN SOLUTION
    return hash((parent_hash, tuple(token_ids)))
    # STARTER
    # raise NotImplementedError("compute_block_hash: see README.md, section \"Prefix caching\"")
    # END SOLUTION


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
        # BEGIN SOLUTION
        if not self._free:
            raise RuntimeError("out of KV blocks (call can_allocate / can_append first)")
        block = self.blocks[self._free.popleft()]
        if block.hash is not None:
            # Evict: forget the old contents. Only drop the map entry if it
            # still points at this block.
            if self._hash_to_block.get(block.hash) == block.block_id:
                del self._hash_to_block[block.hash]
            block.hash = None
        block.ref_count = 1
        return block.block_id
        # STARTER
        # raise NotImplementedError("_take_free_block: see README.md, section \"Eviction\"")
        # END SOLUTION

    def _register_full_block(self, block_id: int, parent_hash: Optional[int], tokens: Sequence[int]) -> None:
        # BEGIN SOLUTION
        if not self.enable_prefix_caching:
            return
        h = compute_block_hash(parent_hash, tokens)
        self.blocks[block_id].hash = h
        self._hash_to_block[h] = block_id
        # STARTER
        # raise NotImplementedError("_register_full_block: see README.md, section \"Prefix caching\"")
        # END SOLUTION

    # ------------------------------------------------------------ operations

    def can_allocate(self, token_ids: Sequence[int]) -> bool:
        """Conservative: enough free blocks even if nothing is a cache hit."""
        # BEGIN SOLUTION
        return self._blocks_needed(len(token_ids)) <= len(self._free)
        # STARTER
        # raise NotImplementedError("can_allocate: see README.md, section \"The block manager API\"")
        # END SOLUTION

    def allocate(self, seq_id: int, token_ids: Sequence[int]) -> int:
        """Give a new sequence blocks for its prompt; return the number of
        prompt tokens whose KV is already cached (hits x block_size)."""
        # BEGIN SOLUTION
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id} already has blocks")
        if not token_ids:
            raise ValueError("cannot allocate an empty sequence")
        state = _SeqState(token_ids=list(token_ids))
        bs = self.block_size
        parent: Optional[int] = None
        hits = 0
        missed = False
        for i in range(self._blocks_needed(len(token_ids))):
            chunk = token_ids[i * bs:(i + 1) * bs]
            full = len(chunk) == bs
            h = compute_block_hash(parent, chunk) if full and self.enable_prefix_caching else None
            cached = self._hash_to_block.get(h) if h is not None and not missed else None
            if cached is not None:
                block = self.blocks[cached]
                if block.ref_count == 0:
                    self._free.remove(cached)  # a free-but-cached block comes back to life
                block.ref_count += 1
                state.block_table.append(cached)
                hits += 1
            else:
                missed = True  # after the first miss, the prefix differs: no more hits
                block_id = self._take_free_block()
                state.block_table.append(block_id)
                if full:
                    self._register_full_block(block_id, parent, chunk)
            parent = h
        self._seqs[seq_id] = state
        return hits * bs
        # STARTER
        # raise NotImplementedError("allocate: see README.md, section \"Prefix caching\"")
        # END SOLUTION

    def can_append(self, seq_id: int) -> bool:
        """Can one more token get a slot? Needs a free block if the last block
        is full (new block) or shared (copy-on-write)."""
        # BEGIN SOLUTION
        state = self._seqs[seq_id]
        last_full = len(state.token_ids) % self.block_size == 0
        last_shared = self.blocks[state.block_table[-1]].ref_count > 1
        return not (last_full or last_shared) or len(self._free) >= 1
        # STARTER
        # raise NotImplementedError("can_append: see README.md, section \"Reference counts and copy-on-write\"")
        # END SOLUTION

    def append(self, seq_id: int, token_id: int) -> Optional[tuple[int, int]]:
        """Give `token_id` a slot at the end of the sequence.

        Returns a (src_block, dst_block) pair when copy-on-write happened: the
        caller must copy the KV of block src into block dst before writing.
        """
        # BEGIN SOLUTION
        state = self._seqs[seq_id]
        bs = self.block_size
        copy = None
        if len(state.token_ids) % bs == 0:
            # The last block is full (or the table is empty): a fresh block.
            state.block_table.append(self._take_free_block())
        else:
            last = self.blocks[state.block_table[-1]]
            if last.ref_count > 1:
                # Copy-on-write: the block is shared (fork); writing into it
                # would change the other sequences' tokens.
                new_id = self._take_free_block()
                last.ref_count -= 1
                state.block_table[-1] = new_id
                copy = (last.block_id, new_id)
        state.token_ids.append(token_id)
        n = len(state.token_ids)
        if n % bs == 0:
            # The last block just became full: hash it so later requests can reuse it.
            parent = self.blocks[state.block_table[-2]].hash if len(state.block_table) > 1 else None
            self._register_full_block(state.block_table[-1], parent, state.token_ids[n - bs:])
        return copy
        # STARTER
        # raise NotImplementedError("append: see README.md, section \"Reference counts and copy-on-write\"")
        # END SOLUTION

    def fork(self, parent_id: int, child_id: int) -> None:
        """The child shares every block of the parent (no copy until a write)."""
        # BEGIN SOLUTION
        if child_id in self._seqs:
            raise ValueError(f"sequence {child_id} already has blocks")
        parent = self._seqs[parent_id]
        for block_id in parent.block_table:
            self.blocks[block_id].ref_count += 1
        self._seqs[child_id] = _SeqState(list(parent.block_table), list(parent.token_ids))
        # STARTER
        # raise NotImplementedError("fork: see README.md, section \"Reference counts and copy-on-write\"")
        # END SOLUTION

    def free(self, seq_id: int) -> None:
        """Release a sequence's blocks, tail-first, so the end of a prefix is
        evicted before its beginning. Blocks keep their hash (still cached)."""
        # BEGIN SOLUTION
        state = self._seqs.pop(seq_id)
        for block_id in reversed(state.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._free.append(block_id)
        # STARTER
        # raise NotImplementedError("free: see README.md, section \"Eviction\"")
        # END SOLUTION
