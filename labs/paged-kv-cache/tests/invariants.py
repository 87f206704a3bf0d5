"""Drive a learner BlockManager through a script of operations and check
GRADING.md's paged-KV invariants after every single one (numbers refer to that
list; README sections are named in every message):

1. free + used = total; no block both free and used; no duplicate in the free list
2. every refcount = number of block tables holding the block; free blocks have 0
3. after everything is freed every block is free again
4. a sequence of length L holds ceil(L / block_size) blocks; a new block is
   taken exactly when L % block_size == 1
5. only full blocks are hashed; a request hits exactly the longest cached
   full-block prefix (judged by content, see reference.BlockTracker)
6. a block is taken from the front of the free list (least recently freed);
   a freed sequence's blocks join the back, tail-first

How: `Checked` records a script (allocate/append/fork/free and the can_* queries)
while the grader's own RefBlockManager says which operations are feasible. `run()`
executes the whole script in the learner's process in ONE call
(adapter.run_block_manager), which returns the learner's state after every
operation as plain data. The replay then compares each state with the one
before it, so the first wrong operation is named with the trace that led to it.
"""

from __future__ import annotations

from collections import Counter

import adapter
from reference import BlockTracker, RefBlockManager

# README sections, quoted in messages.
API = 'README.md, section "The block manager API"'
COW = 'README.md, section "Reference counts and copy-on-write"'
PREFIX = 'README.md, section "Prefix caching"'
EVICT = 'README.md, section "Eviction"'


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Checked:
    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.bs = block_size
        self.caching = prefix_caching
        self.ref = RefBlockManager(num_blocks, block_size, prefix_caching)  # plans feasible operations
        self.ops: list[tuple] = []
        self.all_free_after: set[int] = set()    # op counts after which every block must be free
        self.records: list[dict] | None = None

    # ------------------------------------------------------------ the script

    def _op(self, *op) -> int:
        if self.records is not None:
            raise RuntimeError("the script already ran")
        self.ops.append(op)
        return len(self.ops) - 1

    def live(self) -> list[int]:
        return list(self.ref.tables)

    def allocate(self, seq_id: int, tokens) -> int:
        self.ref.allocate(seq_id, list(tokens))
        return self._op("allocate", seq_id, list(tokens))

    def append(self, seq_id: int, token: int) -> int:
        self.ref.append(seq_id, token)
        return self._op("append", seq_id, token)

    def fork(self, parent_id: int, child_id: int) -> int:
        self.ref.fork(parent_id, child_id)
        return self._op("fork", parent_id, child_id)

    def free(self, seq_id: int) -> int:
        self.ref.free_seq(seq_id)
        return self._op("free", seq_id)

    def can_allocate(self, tokens) -> bool:
        """Queries the learner too (checked in the replay); returns the right answer."""
        self._op("can_allocate", list(tokens))
        return self.ref.can_allocate(list(tokens))

    def can_append(self, seq_id: int) -> bool:
        self._op("can_append", seq_id)
        return self.ref.can_append(seq_id)

    def free_all(self) -> None:
        for seq_id in self.live():
            self.free(seq_id)
        self.all_free_after.add(len(self.ops))

    # ------------------------------------------------------------ run and replay

    def run(self) -> "Checked":
        self.records = adapter.run_block_manager(self.num_blocks, self.bs, self.caching, self.ops)
        first = self.records[0]
        if first.get("error"):
            raise AssertionError(f"BlockManager({self.num_blocks}, {self.bs}, {self.caching}) raised "
                                 f"{first['error']} ({API})")
        self._replay()
        return self

    def state(self, op_index: int) -> dict:
        """The learner's recorded state after operation `op_index` (-1: the initial state)."""
        return self.records[op_index + 1]

    def result(self, op_index: int):
        return self.records[op_index + 1]["result"]

    def table(self, seq_id: int, at: int) -> list[int]:
        return self.state(at)["tables"].get(seq_id)

    def fail(self, what: str) -> None:
        trace = "\n  ".join(self.log[-12:])
        raise AssertionError(f"{what}\n last operations:\n  {trace}")

    def _replay(self) -> None:
        self.tokens: dict[int, list[int]] = {}     # live sequences and their tokens
        self.tracker = BlockTracker(self.bs)
        self.log: list[str] = []                   # the trace so far, for failure messages
        self.now = self.records[0]
        self.check("the initial state")
        if self.now["free"] != list(range(self.num_blocks)):
            self.fail(f"the free list starts as {list(range(self.num_blocks))[:8]}..., got {self.now['free'][:8]}... "
                      f"({API})")
        if 0 in self.all_free_after:
            self._check_all_free()
        for index, op in enumerate(self.ops):
            after = self.records[index + 1] if index + 1 < len(self.records) else None
            described = self._describe(op)
            self.log.append(described)
            if after is None:
                self.fail(f"{described}: never ran (an earlier operation failed)")
            if after.get("error"):
                self.fail(f"{described} raised {after['error']}")
            getattr(self, "_verify_" + op[0])(after, *op[1:])
            self.now = after
            if index + 1 in self.all_free_after:
                self._check_all_free()

    @staticmethod
    def _describe(op) -> str:
        kind, *args = op
        if kind in ("allocate", "can_allocate"):
            seq = f"seq {args[0]}, " if kind == "allocate" else ""
            tokens = args[-1]
            shown = tokens if len(tokens) <= 12 else tokens[:12] + ["..."]
            return f"{kind}({seq}{len(tokens)} tokens {shown})"
        if kind == "append":
            return f"append(seq {args[0]}, token {args[1]})"
        if kind == "fork":
            return f"fork(seq {args[0]} -> seq {args[1]})"
        return f"{kind}(seq {args[0]})"

    # ------------------------------------------------------------ invariants on one state

    def check(self, after: str) -> None:
        st = self.now
        free = st["free"]
        if len(free) != len(set(free)):
            self.fail(f"after {after}: duplicate block in the free list {free} ({API})")
        if st["num_free"] != len(free):
            self.fail(f"after {after}: num_free_blocks = {st['num_free']} but free_block_ids() has {len(free)} "
                      f"blocks ({API})")
        holders: Counter[int] = Counter()
        for seq_id, toks in self.tokens.items():
            table = st["tables"].get(seq_id)
            if table is None:
                self.fail(f"after {after}: has_seq({seq_id}) is False, but the sequence holds blocks ({API})")
            if st["num_tokens"][seq_id] != len(toks):
                self.fail(f"after {after}: num_tokens({seq_id}) = {st['num_tokens'][seq_id]}, expected {len(toks)} "
                          f"({API})")
            if len(table) != ceil_div(len(toks), self.bs):
                self.fail(f"after {after}: sequence {seq_id} of length {len(toks)} holds "
                          f"{len(table)} blocks {table}, expected ceil({len(toks)} / {self.bs}) = "
                          f"{ceil_div(len(toks), self.bs)} ({API})")
            if len(set(table)) != len(table):
                self.fail(f"after {after}: sequence {seq_id} holds the same block twice: {table} ({API})")
            holders.update(table)
            for i, block_id in enumerate(table):
                full = (i + 1) * self.bs <= len(toks)
                hashed = st["hashed"][block_id]
                if hashed and not (full and self.caching):
                    filled = min(self.bs, len(toks) - i * self.bs)
                    self.fail(f"after {after}: block {block_id} (block {i} of sequence {seq_id}, "
                              f"{filled}/{self.bs} tokens) has a hash, expected None: "
                              + ("only full blocks are hashed" if self.caching else "prefix caching is off")
                              + f" ({PREFIX})")
                if full and self.caching and not hashed:
                    self.fail(f"after {after}: full block {block_id} (block {i} of sequence {seq_id}) "
                              f"has no hash; a full block is registered when it fills ({PREFIX})")
        used = set(holders)
        if used & set(free):
            self.fail(f"after {after}: block(s) {sorted(used & set(free))} are both free and in a "
                      f"block table ({API})")
        if len(used) + len(free) != self.num_blocks:
            self.fail(f"after {after}: {len(free)} free + {len(used)} used != {self.num_blocks} blocks "
                      f"(a block was lost or counted twice) ({API})")
        for block_id in range(self.num_blocks):
            rc = st["ref"][block_id]
            if rc != holders.get(block_id, 0):
                self.fail(f"after {after}: ref_count({block_id}) = {rc}, expected "
                          f"{holders.get(block_id, 0)} (the number of block tables holding it) ({COW})")

    def _check_all_free(self) -> None:
        if sorted(self.now["free"]) != list(range(self.num_blocks)):
            self.fail(f"after freeing every sequence the free list is {self.now['free']}, expected "
                      f"every block 0..{self.num_blocks - 1} ({API})")

    # ------------------------------------------------------------ one operation, before -> after

    def _verify_can_allocate(self, after, tokens) -> None:
        got = after["result"]
        want = ceil_div(len(tokens), self.bs) <= len(self.now["free"])
        if got != want:
            self.fail(f"can_allocate({len(tokens)} tokens) returned {got}, expected {want}: "
                      f"{ceil_div(len(tokens), self.bs)} block(s) needed, {len(self.now['free'])} free "
                      f"(conservative: cache hits are ignored) ({API})")
        self._unchanged(after, "can_allocate")

    def _verify_can_append(self, after, seq_id) -> None:
        got = after["result"]
        toks, table = self.tokens[seq_id], self.now["tables"][seq_id]
        shared = self.now["ref"][table[-1]] > 1
        needs_block = len(toks) % self.bs == 0 or shared
        want = not needs_block or len(self.now["free"]) >= 1
        if got != want:
            self.fail(f"can_append(seq {seq_id}) returned {got}, expected {want} (length {len(toks)}, last block "
                      f"{'full' if len(toks) % self.bs == 0 else 'partial'}, shared: {shared}, "
                      f"{len(self.now['free'])} free) ({API})")
        self._unchanged(after, "can_append")

    def _unchanged(self, after, what: str) -> None:
        for key in ("free", "ref", "tables", "hashed"):
            if after[key] != self.now[key]:
                self.fail(f"{what} changed the block manager's state ({key}): a query must not take or free "
                          f"blocks ({API})")

    def _verify_allocate(self, after, seq_id, tokens) -> None:
        before_free = self.now["free"]
        expected_hits = self.tracker.expected_hits(tokens) if self.caching else 0
        expected_hit_blocks = [self.tracker.holder(tokens[:(i + 1) * self.bs]) for i in range(expected_hits)]
        cached = after["result"]
        self.tokens[seq_id] = list(tokens)
        table = after["tables"].get(seq_id)
        if table is None:
            self.fail(f"allocate(seq {seq_id}): has_seq({seq_id}) is False afterwards ({API})")
        if cached != expected_hits * self.bs:
            why = ("prefix caching is off" if not self.caching else
                   f"the longest run of cached full blocks holding the same tokens from position 0 is "
                   f"{expected_hits} block(s)")
            if self.caching and isinstance(cached, int) and cached > (len(tokens) // self.bs) * self.bs:
                why += "; a partial block is never a hit"
            self.fail(f"allocate(seq {seq_id}) returned {cached} cached tokens, expected {expected_hits * self.bs}: "
                      f"{why} ({PREFIX})")
        if table[:expected_hits] != expected_hit_blocks:
            self.fail(f"allocate(seq {seq_id}): the prefix hits must reuse blocks {expected_hit_blocks} (the cached "
                      f"blocks holding those prefixes), got {table[:expected_hits]} ({PREFIX})")
        # Fresh blocks come from the front of the free list, in order.
        remaining = [b for b in before_free if b not in expected_hit_blocks]
        fresh = table[expected_hits:]
        if fresh != remaining[:len(fresh)]:
            self.fail(f"allocate(seq {seq_id}): new blocks must be the first {len(fresh)} of the free list "
                      f"{remaining[:len(fresh) + 3]}..., got {fresh} (least recently freed first) "
                      f"({EVICT})")
        if after["free"] != remaining[len(fresh):]:
            self.fail(f"allocate(seq {seq_id}): the free list should be {remaining[len(fresh):]} (order kept, a "
                      f"cache hit removed from the middle), got {after['free']} ({EVICT})")
        for i, block_id in enumerate(fresh, start=expected_hits):
            self.tracker.forget(block_id)
            if self.caching and (i + 1) * self.bs <= len(tokens):
                self.tracker.record_full(block_id, tokens[:(i + 1) * self.bs])
        self.now = after
        self.check(f"allocate(seq {seq_id})")

    def _verify_append(self, after, seq_id, token) -> None:
        before_free = self.now["free"]
        before_table = self.now["tables"][seq_id]
        last_shared = self.now["ref"][before_table[-1]] > 1
        copy = after["result"]
        toks = self.tokens[seq_id]
        toks.append(token)
        n = len(toks)
        table = after["tables"][seq_id]
        if n % self.bs == 1 or self.bs == 1:
            if copy is not None:
                self.fail(f"append(seq {seq_id}): the last block was full, so a fresh block is taken and nothing is "
                          f"copied: expected None, got {copy} ({COW})")
            if table[:-1] != before_table or len(table) != len(before_table) + 1:
                self.fail(f"append(seq {seq_id}): new length {n} (L % block_size == 1) must add exactly one block: "
                          f"table {before_table} -> {table} ({API})")
            if table[-1] != before_free[0]:
                self.fail(f"append(seq {seq_id}): the new block must be the front of the free list "
                          f"{before_free[:3]}..., got {table[-1]} ({EVICT})")
            self.tracker.forget(table[-1])
        elif last_shared:
            want = (before_table[-1], before_free[0])
            if copy is None or tuple(copy) != want:
                self.fail(f"append(seq {seq_id}): the last block {before_table[-1]} is partial and shared "
                          f"(ref_count {self.now['ref'][before_table[-1]]}), so copy-on-write into the front of the "
                          f"free list must return {want}; got {copy} ({COW})")
            if table != before_table[:-1] + [before_free[0]]:
                self.fail(f"append(seq {seq_id}): after copy-on-write the table should be "
                          f"{before_table[:-1] + [before_free[0]]}, got {table} ({COW})")
            self.tracker.forget(table[-1])
        else:
            if copy is not None or table != before_table:
                self.fail(f"append(seq {seq_id}): the token fits in the unshared last block: the table must stay "
                          f"{before_table} and nothing is copied; got table {table}, copy {copy} ({COW})")
        if self.caching and n % self.bs == 0:
            self.tracker.record_full(table[-1], toks)
        self.now = after
        self.check(f"append(seq {seq_id})")

    def _verify_fork(self, after, parent_id, child_id) -> None:
        before_free = self.now["free"]
        self.tokens[child_id] = list(self.tokens[parent_id])
        parent, child = after["tables"].get(parent_id), after["tables"].get(child_id)
        if child != parent:
            self.fail(f"fork({parent_id} -> {child_id}): the child must share the parent's blocks {parent}, "
                      f"got {child} ({COW})")
        if after["free"] != before_free:
            self.fail(f"fork({parent_id} -> {child_id}): must not take blocks (the free list changed "
                      f"{before_free[:6]} -> {after['free'][:6]}); copy-on-write happens on the first write ({COW})")
        self.now = after
        self.check(f"fork({parent_id} -> {child_id})")

    def _verify_free(self, after, seq_id) -> None:
        before_free = self.now["free"]
        table = self.now["tables"][seq_id]
        del self.tokens[seq_id]
        still_held = {b for s in self.tokens for b in self.now["tables"][s]}
        released = [b for b in reversed(table) if b not in still_held]
        if seq_id in after["tables"]:
            self.fail(f"free(seq {seq_id}): has_seq({seq_id}) is still True ({API})")
        if after["free"] != before_free + released:
            self.fail(f"free(seq {seq_id}): blocks {released} (ref_count now 0) must join the back of the free list, "
                      f"the sequence's last block first; expected {before_free + released}, got {after['free']} "
                      f"(invariants 3, 6) ({EVICT})")
        self.now = after
        self.check(f"free(seq {seq_id})")
