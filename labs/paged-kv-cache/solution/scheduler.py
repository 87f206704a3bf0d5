"""Continuous batching: which sequences run in the next step.

A static batch waits for its slowest member; continuous batching re-decides
every step. Sequences live in two queues:

    waiting  (FIFO)  requests not yet in the KV cache (new, or preempted)
    running          sequences holding blocks, oldest admission first

Each step (README.md, section "Continuous batching"):
1. Decodes first: every running sequence gets one token slot. If the pool has
   no block for it, preempt the *newest* running sequence (it has done the
   least work, and the oldest requests finish first): free its blocks and put
   it at the front of `waiting`. Its KV is recomputed when it is resumed
   ("recompute" preemption; vLLM's default).
2. Then, if nothing was preempted this step, admit waiting sequences in FIFO
   order while there is room: at most `max_num_seqs` running, at most
   `max_num_batched_tokens` tokens computed in the step, enough free blocks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from block_manager import BlockManager


class SequenceStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)  # identity, not field equality: two requests may look alike
class Sequence:
    seq_id: int
    prompt_token_ids: list[int]
    max_tokens: int
    output_token_ids: list[int] = field(default_factory=list)
    status: SequenceStatus = SequenceStatus.WAITING
    num_cached_tokens: int = 0      # prompt tokens whose KV was found in the prefix cache
    num_preemptions: int = 0

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    def __len__(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED


@dataclass
class SchedulerConfig:
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 256


@dataclass
class SchedulerOutput:
    prefills: list[Sequence]                 # admitted this step: compute tokens num_cached_tokens.. len-1
    decodes: list[Sequence]                  # one new token each: the last token of token_ids
    preempted: list[Sequence]                # moved back to waiting this step (newest first)
    copies: list[tuple[int, int]]            # copy-on-write (src_block, dst_block) to apply before writing
    num_batched_tokens: int                  # tokens computed this step

    @property
    def is_empty(self) -> bool:
        return not self.prefills and not self.decodes


class Scheduler:
    def __init__(self, config: SchedulerConfig, block_manager: BlockManager) -> None:
        if config.max_num_batched_tokens < config.max_num_seqs:
            raise ValueError("max_num_batched_tokens must be >= max_num_seqs (one decode token each)")
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        bm = self.block_manager
        need = -(-(len(seq.prompt_token_ids) + seq.max_tokens) // bm.block_size)
        if need > bm.num_blocks:
            raise ValueError(f"sequence {seq.seq_id} needs {need} blocks; the pool has {bm.num_blocks}")
        if len(seq.prompt_token_ids) + seq.max_tokens > self.config.max_num_batched_tokens:
            # A preempted sequence is recomputed in one step: it must fit the budget.
            raise ValueError(f"sequence {seq.seq_id} is longer than max_num_batched_tokens")
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def _preempt(self, seq: Sequence) -> None:
        """Recompute preemption: free the blocks, forget the cache hits, and put the
        sequence at the FRONT of waiting (it resumes before newer requests)."""
        # BEGIN SOLUTION
        self.block_manager.free(seq.seq_id)
        seq.status = SequenceStatus.WAITING
        seq.num_cached_tokens = 0
        seq.num_preemptions += 1
        self.waiting.appendleft(seq)
        # STARTER
        # raise NotImplementedError("_preempt: see README.md, section \"Continuous batching\"")
        # END SOLUTION

    def schedule(self) -> SchedulerOutput:
        """Pick this step's work: decodes for every running sequence (preempting the
        newest not-yet-scheduled one while no block is free), then - if nothing was
        preempted - FIFO prefills within max_num_seqs, the token budget and free blocks."""
        # BEGIN SOLUTION
        bm = self.block_manager
        budget = self.config.max_num_batched_tokens
        decodes: list[Sequence] = []
        preempted: list[Sequence] = []
        copies: list[tuple[int, int]] = []

        # 1. Decodes, oldest first; `pending` are running sequences not yet given a slot.
        pending = deque(self.running)
        while pending:
            seq = pending.popleft()
            while not bm.can_append(seq.seq_id):
                if pending:
                    victim = pending.pop()          # the newest running sequence
                    self._preempt(victim)
                    preempted.append(victim)
                else:
                    self._preempt(seq)              # nothing newer left: preempt itself
                    preempted.append(seq)
                    break
            else:
                copy = bm.append(seq.seq_id, seq.token_ids[-1])
                if copy is not None:
                    copies.append(copy)
                decodes.append(seq)
        self.running = list(decodes)
        budget -= len(decodes)

        # 2. Prefills (new or resumed sequences), FIFO, unless we just ran out of memory.
        prefills: list[Sequence] = []
        num_batched = len(decodes)
        while not preempted and self.waiting and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            tokens = seq.token_ids
            if len(tokens) > budget or not bm.can_allocate(tokens):
                break
            self.waiting.popleft()
            seq.num_cached_tokens = bm.allocate(seq.seq_id, tokens)
            seq.status = SequenceStatus.RUNNING
            computed = len(tokens) - min(seq.num_cached_tokens, len(tokens) - 1)
            budget -= computed
            num_batched += computed
            self.running.append(seq)
            prefills.append(seq)
        return SchedulerOutput(prefills, decodes, preempted, copies, num_batched)
        # STARTER
        # raise NotImplementedError("schedule: see README.md, section \"Continuous batching\"")
        # END SOLUTION

    def postprocess(self, seq: Sequence, token_id: int) -> bool:
        """Record a sampled token; free the sequence when it is done. Returns finished?"""
        # BEGIN SOLUTION
        seq.output_token_ids.append(token_id)
        if len(seq.output_token_ids) >= seq.max_tokens:
            seq.status = SequenceStatus.FINISHED
            self.block_manager.free(seq.seq_id)
            self.running.remove(seq)
            return True
        return False
        # STARTER
        # raise NotImplementedError("postprocess: see README.md, section \"Continuous batching\"")
        # END SOLUTION
