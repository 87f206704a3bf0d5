"""Drive a learner BlockManager through operations and check GRADING.md's
paged-KV invariants after every single one (numbers refer to that list):

1. free + used = total; no block both free and used; no duplicate in the free list
2. every refcount = number of block tables holding the block; free blocks have 0
3. after everything is freed every block is free again
4. a sequence of length L holds ceil(L / block_size) blocks; a new block is
   taken exactly when L % block_size == 1
5. only full blocks are hashed; a request hits exactly the longest cached
   full-block prefix (judged by content, see reference.BlockTracker)
6. a block is taken from the front of the free list (least recently freed);
   a freed sequence's blocks join the back, tail-first

`Checked` keeps its own copy of every sequence's tokens and compares each
operation's effect with the state before it.
"""

from __future__ import annotations

from collections import Counter

from reference import BlockTracker


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Checked:
    def __init__(self, bm, num_blocks: int, block_size: int, prefix_caching: bool) -> None:
        self.bm = bm
        self.num_blocks = num_blocks
        self.bs = block_size
        self.caching = prefix_caching
        self.tokens: dict[int, list[int]] = {}     # live sequences and their tokens
        self.tracker = BlockTracker(block_size)
        self.log: list[str] = []                   # the trace so far, for failure messages
        self.check("initial state")

    # ------------------------------------------------------------ helpers

    def fail(self, what: str) -> None:
        trace = "\n  ".join(self.log[-12:])
        raise AssertionError(f"{what}\n last operations:\n  {trace}")

    def free_list(self) -> list[int]:
        return [int(b) for b in self.bm.free_block_ids()]

    def table(self, seq_id: int) -> list[int]:
        return [int(b) for b in self.bm.block_table(seq_id)]

    # ------------------------------------------------------------ invariants

    def check(self, after: str) -> None:
        free = self.free_list()
        if len(free) != len(set(free)):
            self.fail(f"after {after}: invariant 1: duplicate block in the free list {free}")
        if int(self.bm.num_free_blocks) != len(free):
            self.fail(f"after {after}: num_free_blocks={self.bm.num_free_blocks} but the free list has {len(free)}")
        holders: Counter[int] = Counter()
        for seq_id, toks in self.tokens.items():
            table = self.table(seq_id)
            if len(table) != ceil_div(len(toks), self.bs):
                self.fail(f"after {after}: invariant 4: sequence {seq_id} of length {len(toks)} holds "
                          f"{len(table)} blocks, expected {ceil_div(len(toks), self.bs)}")
            if len(set(table)) != len(table):
                self.fail(f"after {after}: sequence {seq_id} holds the same block twice: {table}")
            holders.update(table)
            for i, block_id in enumerate(table):
                full = (i + 1) * self.bs <= len(toks)
                hashed = self.bm.block_hash(block_id) is not None
                if hashed and not (full and self.caching):
                    self.fail(f"after {after}: invariant 5: block {block_id} (block {i} of sequence {seq_id}, "
                              f"{min(self.bs, len(toks) - i * self.bs)}/{self.bs} tokens) has a hash"
                              + ("" if self.caching else " with prefix caching off"))
                if full and self.caching and not hashed:
                    self.fail(f"after {after}: invariant 5: full block {block_id} of sequence {seq_id} has no hash")
        used = set(holders)
        if used & set(free):
            self.fail(f"after {after}: invariant 1: block(s) {sorted(used & set(free))} are both free and used")
        if len(used) + len(free) != self.num_blocks:
            self.fail(f"after {after}: invariant 1: {len(free)} free + {len(used)} used != {self.num_blocks} blocks")
        for block_id in range(self.num_blocks):
            rc = int(self.bm.ref_count(block_id))
            if rc != holders.get(block_id, 0):
                self.fail(f"after {after}: invariant 2: block {block_id} has ref_count {rc} but "
                          f"{holders.get(block_id, 0)} block table(s) hold it")

    # ------------------------------------------------------------ operations

    def can_allocate(self, tokens: list[int]) -> bool:
        got = bool(self.bm.can_allocate(list(tokens)))
        want = ceil_div(len(tokens), self.bs) <= len(self.free_list())
        if got != want:
            self.fail(f"can_allocate({len(tokens)} tokens) returned {got}; with {len(self.free_list())} free blocks "
                      f"and {ceil_div(len(tokens), self.bs)} needed it should be {want}")
        return got

    def can_append(self, seq_id: int) -> bool:
        got = bool(self.bm.can_append(seq_id))
        toks, table = self.tokens[seq_id], self.table(seq_id)
        needs_block = len(toks) % self.bs == 0 or int(self.bm.ref_count(table[-1])) > 1
        want = not needs_block or len(self.free_list()) >= 1
        if got != want:
            self.fail(f"can_append(seq {seq_id}) returned {got}, expected {want} (length {len(toks)}, "
                      f"last block shared: {int(self.bm.ref_count(table[-1])) > 1}, {len(self.free_list())} free)")
        return got

    def _took_fresh(self, block_id: int) -> None:
        self.tracker.forget(block_id)

    def allocate(self, seq_id: int, tokens: list[int]) -> int:
        self.log.append(f"allocate(seq {seq_id}, {len(tokens)} tokens)")
        before_free = self.free_list()
        expected_hits = self.tracker.expected_hits(tokens) if self.caching else 0
        expected_hit_blocks = [self.tracker.holder(tokens[:(i + 1) * self.bs]) for i in range(expected_hits)]
        cached = int(self.bm.allocate(seq_id, list(tokens)))
        self.tokens[seq_id] = list(tokens)
        table = self.table(seq_id)
        if cached != expected_hits * self.bs:
            self.fail(f"allocate: returned {cached} cached tokens; the longest cached full-block prefix is "
                      f"{expected_hits} block(s) = {expected_hits * self.bs} tokens (invariant 5)")
        if table[:expected_hits] != expected_hit_blocks:
            self.fail(f"allocate: prefix hits should reuse blocks {expected_hit_blocks}, got {table[:expected_hits]}")
        # Fresh blocks come from the front of the free list, in order (invariant 6).
        remaining = [b for b in before_free if b not in expected_hit_blocks]
        fresh = table[expected_hits:]
        if fresh != remaining[:len(fresh)]:
            self.fail(f"allocate: new blocks must be the first {len(fresh)} of the free list "
                      f"{remaining[:len(fresh) + 3]}..., got {fresh} (invariant 6: least recently freed first)")
        if self.free_list() != remaining[len(fresh):]:
            self.fail(f"allocate: the free list should be {remaining[len(fresh):]} (order kept), got {self.free_list()}")
        for i, block_id in enumerate(fresh, start=expected_hits):
            self._took_fresh(block_id)
            if self.caching and (i + 1) * self.bs <= len(tokens):
                self.tracker.record_full(block_id, tokens[:(i + 1) * self.bs])
        self.check(f"allocate(seq {seq_id})")
        return cached

    def append(self, seq_id: int, token: int) -> None:
        self.log.append(f"append(seq {seq_id}, token {token})")
        before_free = self.free_list()
        before_table = self.table(seq_id)
        last_shared = int(self.bm.ref_count(before_table[-1])) > 1
        copy = self.bm.append(seq_id, token)
        toks = self.tokens[seq_id]
        toks.append(token)
        n = len(toks)
        table = self.table(seq_id)
        if n % self.bs == 1 or self.bs == 1:
            if copy is not None:
                self.fail(f"append: the last block was full, so no copy-on-write; got copy {copy}")
            if table[:-1] != before_table or len(table) != len(before_table) + 1:
                self.fail(f"append: length {n} (L % block_size == 1) must add exactly one block "
                          f"(invariant 4): table {before_table} -> {table}")
            if table[-1] != before_free[0]:
                self.fail(f"append: the new block must be the front of the free list {before_free[:3]}..., "
                          f"got {table[-1]} (invariant 6)")
            self._took_fresh(table[-1])
        elif last_shared:
            if copy is None or tuple(int(x) for x in copy) != (before_table[-1], before_free[0]):
                self.fail(f"append: the last block {before_table[-1]} is shared (ref_count > 1), so copy-on-write "
                          f"into {before_free[0]} must be returned as ({before_table[-1]}, {before_free[0]}); got {copy}")
            if table != before_table[:-1] + [before_free[0]]:
                self.fail(f"append: after copy-on-write the table should be {before_table[:-1] + [before_free[0]]}, "
                          f"got {table}")
            self._took_fresh(table[-1])
        else:
            if copy is not None or table != before_table:
                self.fail(f"append: the token fits in the unshared last block; the table must not change and "
                          f"nothing is copied (table {before_table} -> {table}, copy {copy})")
        if self.caching and n % self.bs == 0:
            self.tracker.record_full(table[-1], toks)
        self.check(f"append(seq {seq_id})")

    def fork(self, parent_id: int, child_id: int) -> None:
        self.log.append(f"fork(seq {parent_id} -> seq {child_id})")
        before_free = self.free_list()
        self.bm.fork(parent_id, child_id)
        self.tokens[child_id] = list(self.tokens[parent_id])
        if self.table(child_id) != self.table(parent_id):
            self.fail(f"fork: the child must share the parent's blocks {self.table(parent_id)}, "
                      f"got {self.table(child_id)}")
        if self.free_list() != before_free:
            self.fail("fork: must not take blocks (copy-on-write happens on the first write)")
        self.check(f"fork({parent_id} -> {child_id})")

    def free(self, seq_id: int) -> None:
        self.log.append(f"free(seq {seq_id})")
        before_free = self.free_list()
        table = self.table(seq_id)
        del self.tokens[seq_id]
        still_held = {b for s in self.tokens for b in self.table(s)}
        released = [b for b in reversed(table) if b not in still_held]
        self.bm.free(seq_id)
        if self.free_list() != before_free + released:
            self.fail(f"free: blocks {released} (ref_count now 0) must join the back of the free list tail-first; "
                      f"expected {before_free + released}, got {self.free_list()} (invariants 3, 6)")
        self.check(f"free(seq {seq_id})")

    def free_all(self) -> None:
        for seq_id in list(self.tokens):
            self.free(seq_id)
        if sorted(self.free_list()) != list(range(self.num_blocks)):
            self.fail(f"invariant 3: after freeing everything the free list is {self.free_list()}")
