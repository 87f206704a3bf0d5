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

from engine_model import ScaledModel, make_model  # noqa: F401 - re-exported: the tests build models here


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


# ---------------------------------------------------------------- block manager and scheduler
#
# The grader's own copy of the handout's rules. It only *plans* operation scripts
# and expected schedules (which operations are feasible, what a correct scheduler
# admits); the learner's code runs the same script in its own process and the
# tests compare the recorded states (invariants.py, test_scheduler.py).


class RefBlockManager:
    """The handout's block manager (README.md, "The block manager API" through "Eviction")."""

    def __init__(self, num_blocks: int, block_size: int, caching: bool) -> None:
        from collections import deque

        self.num_blocks, self.bs, self.caching = num_blocks, block_size, caching
        self.free: "deque[int]" = deque(range(num_blocks))
        self.ref = [0] * num_blocks
        self.hash: list = [None] * num_blocks
        self.by_hash: dict = {}
        self.tables: dict[int, list[int]] = {}
        self.tokens: dict[int, list[int]] = {}

    def _take(self) -> int:
        block = self.free.popleft()
        h = self.hash[block]
        if h is not None:
            if self.by_hash.get(h) == block:
                del self.by_hash[h]
            self.hash[block] = None
        self.ref[block] = 1
        return block

    def _register(self, block: int, parent, tokens) -> None:
        if self.caching:
            h = hash((parent, tuple(tokens)))
            self.hash[block] = h
            self.by_hash[h] = block

    def can_allocate(self, tokens) -> bool:
        return -(-len(tokens) // self.bs) <= len(self.free)

    def allocate(self, seq: int, tokens) -> int:
        table, parent, hits, missed = [], None, 0, False
        for i in range(-(-len(tokens) // self.bs)):
            chunk = tokens[i * self.bs:(i + 1) * self.bs]
            full = len(chunk) == self.bs
            h = hash((parent, tuple(chunk))) if full and self.caching else None
            cached = self.by_hash.get(h) if h is not None and not missed else None
            if cached is not None:
                if self.ref[cached] == 0:
                    self.free.remove(cached)
                self.ref[cached] += 1
                table.append(cached)
                hits += 1
            else:
                missed = True
                block = self._take()
                table.append(block)
                if full:
                    self._register(block, parent, chunk)
            parent = h
        self.tables[seq], self.tokens[seq] = table, list(tokens)
        return hits * self.bs

    def can_append(self, seq: int) -> bool:
        needs = len(self.tokens[seq]) % self.bs == 0 or self.ref[self.tables[seq][-1]] > 1
        return not needs or len(self.free) >= 1

    def append(self, seq: int, token: int):
        table, toks, copy = self.tables[seq], self.tokens[seq], None
        if len(toks) % self.bs == 0:
            table.append(self._take())
        elif self.ref[table[-1]] > 1:
            new = self._take()
            self.ref[table[-1]] -= 1
            copy = (table[-1], new)
            table[-1] = new
        toks.append(token)
        if len(toks) % self.bs == 0:
            parent = self.hash[table[-2]] if len(table) > 1 else None
            self._register(table[-1], parent, toks[-self.bs:])
        return copy

    def fork(self, parent: int, child: int) -> None:
        for block in self.tables[parent]:
            self.ref[block] += 1
        self.tables[child], self.tokens[child] = list(self.tables[parent]), list(self.tokens[parent])

    def free_seq(self, seq: int) -> None:
        for block in reversed(self.tables.pop(seq)):
            self.ref[block] -= 1
            if self.ref[block] == 0:
                self.free.append(block)
        del self.tokens[seq]


class RefScheduler:
    """The handout's scheduler (README.md, "Continuous batching") over RefBlockManager.

    Sequences are plain dicts {id, prompt, out, max_tokens, cached}; `schedule()`
    returns the same record fields that adapter.run_scheduler reports."""

    def __init__(self, max_num_seqs: int, budget: int, bm: RefBlockManager) -> None:
        from collections import deque

        self.max_num_seqs, self.budget, self.bm = max_num_seqs, budget, bm
        self.waiting: "deque[dict]" = deque()
        self.running: list[dict] = []

    def add(self, seq: dict) -> None:
        self.waiting.append(seq)

    @staticmethod
    def tokens(seq: dict) -> list[int]:
        return seq["prompt"] + seq["out"]

    def _preempt(self, seq: dict) -> None:
        self.bm.free_seq(seq["id"])
        seq["cached"] = 0
        self.waiting.appendleft(seq)

    def schedule(self) -> dict:
        from collections import deque

        decodes, preempted, copies = [], [], []
        pending = deque(self.running)
        while pending:
            seq = pending.popleft()
            while not self.bm.can_append(seq["id"]):
                victim = pending.pop() if pending else seq
                self._preempt(victim)
                preempted.append(victim)
                if victim is seq:
                    break
            else:
                copy = self.bm.append(seq["id"], self.tokens(seq)[-1])
                if copy is not None:
                    copies.append(copy)
                decodes.append(seq)
        self.running = list(decodes)
        budget = self.budget - len(decodes)
        prefills, num_batched = [], len(decodes)
        while not preempted and self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            toks = self.tokens(seq)
            if len(toks) > budget or not self.bm.can_allocate(toks):
                break
            self.waiting.popleft()
            seq["cached"] = self.bm.allocate(seq["id"], toks)
            computed = len(toks) - min(seq["cached"], len(toks) - 1)
            budget -= computed
            num_batched += computed
            self.running.append(seq)
            prefills.append(seq)
        return {"prefills": [s["id"] for s in prefills], "decodes": [s["id"] for s in decodes],
                "preempted": [s["id"] for s in preempted], "copies": copies, "num_batched_tokens": num_batched,
                "cached": {s["id"]: s["cached"] for s in prefills}}

    def postprocess(self, seq: dict, token: int) -> bool:
        seq["out"].append(token)
        if len(seq["out"]) >= seq["max_tokens"]:
            self.bm.free_seq(seq["id"])
            self.running.remove(seq)
            return True
        return False
