"""A tiny vLLM-style engine: scheduler + block manager + paged KV cache + model.

One `step()`:
    schedule -> apply copy-on-write copies -> flatten every scheduled token into
    one batch -> model.forward with an `attend` that writes K/V through the slot
    mapping and runs paged attention -> greedy-sample the last token of each
    sequence -> update metrics.

The trick that makes prefill and decode the same code: *every* token is a query
row for paged attention. A prompt token at position p attends to positions
0..p of its own sequence, i.e. context_len = p + 1 with the sequence's block
table. Its own K/V were written into the cache a moment earlier (same layer),
so causality comes for free.

Metrics (README.md, section "Measuring an engine"), all counted in steps:
    TTFT  = step that produced the first token - step count when the request arrived
    TPOT  = (step of the last token - step of the first token) / (output tokens - 1)
    tokens per step = generated tokens / steps
    KV utilisation  = tokens stored / slots in used blocks, summed over steps
    reserved utilisation = tokens stored / (running sequences x max_model_len): what a
                           server that reserves the maximum length per request would get
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence as Seq

import torch

from block_manager import BlockManager
from model import TinyTransformer
from paged_attention import compute_slot_mapping, paged_attention, write_kv
from scheduler import Scheduler, SchedulerConfig, SchedulerOutput, Sequence


@dataclass
class EngineConfig:
    num_blocks: int = 64
    block_size: int = 4
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 256
    enable_prefix_caching: bool = True
    max_model_len: int = 128


@dataclass
class RequestMetrics:
    arrival_step: int
    first_token_step: Optional[int] = None
    finish_step: Optional[int] = None
    num_output_tokens: int = 0

    @property
    def ttft_steps(self) -> Optional[int]:
        return None if self.first_token_step is None else self.first_token_step - self.arrival_step

    @property
    def tpot_steps(self) -> Optional[float]:
        if self.finish_step is None or self.first_token_step is None:
            return None
        if self.num_output_tokens < 2:
            return 0.0
        return (self.finish_step - self.first_token_step) / (self.num_output_tokens - 1)


@dataclass
class EngineMetrics:
    num_steps: int
    num_generated_tokens: int
    num_preemptions: int
    tokens_stored: int            # summed over steps
    slots_allocated: int          # summed over steps (used blocks x block_size)
    slots_reserved: int           # summed over steps (running sequences x max_model_len)
    requests: dict[int, RequestMetrics] = field(default_factory=dict)

    @property
    def tokens_per_step(self) -> float:
        return self.num_generated_tokens / self.num_steps if self.num_steps else 0.0

    @property
    def kv_utilisation(self) -> float:
        return self.tokens_stored / self.slots_allocated if self.slots_allocated else 0.0

    @property
    def reserved_utilisation(self) -> float:
        return self.tokens_stored / self.slots_reserved if self.slots_reserved else 0.0


class LLMEngine:
    def __init__(self, model: TinyTransformer, config: EngineConfig = EngineConfig()) -> None:
        self.model = model
        self.config = config
        mc = model.config
        self.block_manager = BlockManager(config.num_blocks, config.block_size, config.enable_prefix_caching)
        self.scheduler = Scheduler(SchedulerConfig(config.max_num_seqs, config.max_num_batched_tokens),
                                   self.block_manager)
        shape = (config.num_blocks, config.block_size, mc.n_kv_heads, mc.head_dim)
        self.key_caches = [torch.zeros(shape, dtype=torch.float64) for _ in range(mc.n_layers)]
        self.value_caches = [torch.zeros(shape, dtype=torch.float64) for _ in range(mc.n_layers)]
        self.sequences: dict[int, Sequence] = {}
        self.num_steps = 0
        self.metrics_ = EngineMetrics(0, 0, 0, 0, 0, 0)

    # ------------------------------------------------------------ requests

    def add_request(self, prompt_token_ids: Seq[int], max_tokens: int) -> int:
        seq_id = len(self.sequences)
        seq = Sequence(seq_id, list(prompt_token_ids), max_tokens)
        self.scheduler.add(seq)
        self.sequences[seq_id] = seq
        self.metrics_.requests[seq_id] = RequestMetrics(arrival_step=self.num_steps)
        return seq_id

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def generate(self, prompts: Seq[Seq[int]], max_tokens: int | Seq[int]) -> list[list[int]]:
        """Run every prompt to completion; outputs in the order of `prompts`."""
        if isinstance(max_tokens, int):
            max_tokens = [max_tokens] * len(prompts)
        ids = [self.add_request(p, m) for p, m in zip(prompts, max_tokens)]
        while self.has_unfinished():
            self.step()
        return [list(self.sequences[i].output_token_ids) for i in ids]

    # ------------------------------------------------------------ one step

    def _prepare_inputs(self, out: SchedulerOutput):
        """Flatten the scheduled tokens. Returns (token_ids, positions, slot_mapping,
        block_tables, context_lens, last_rows) where last_rows[i] is the row of the
        last token of the i-th sequence in out.decodes + out.prefills."""
        # BEGIN SOLUTION
        bs = self.config.block_size
        tokens, positions, slots, tables, ctx, last_rows = [], [], [], [], [], []
        for seq in out.decodes + out.prefills:
            table = self.block_manager.block_table(seq.seq_id)
            n = len(seq)
            # Decode: only the last token. Prefill: from the first uncached token,
            # but always at least the last one (its logits give the next token).
            start = n - 1 if seq in out.decodes else min(seq.num_cached_tokens, n - 1)
            seq_slots = compute_slot_mapping(table, start, n, bs)
            for pos, slot in zip(range(start, n), seq_slots):
                tokens.append(seq.token_ids[pos])
                positions.append(pos)
                # A fully cached prompt recomputes its last token; its KV is
                # already in a (maybe shared) block, so do not write it again.
                slots.append(-1 if pos < seq.num_cached_tokens and seq not in out.decodes else slot)
                tables.append(table)
                ctx.append(pos + 1)
            last_rows.append(len(tokens) - 1)
        width = max(len(t) for t in tables)
        block_tables = torch.zeros(len(tables), width, dtype=torch.int32)
        for i, t in enumerate(tables):
            block_tables[i, :len(t)] = torch.tensor(t, dtype=torch.int32)
        return (torch.tensor(tokens, dtype=torch.long), torch.tensor(positions, dtype=torch.long),
                torch.tensor(slots, dtype=torch.long), block_tables,
                torch.tensor(ctx, dtype=torch.int32), last_rows)
        # STARTER
        # raise NotImplementedError("_prepare_inputs: see README.md, section \"The engine\"")
        # END SOLUTION

    def step(self) -> SchedulerOutput:
        """schedule -> copy-on-write copies -> flattened forward pass with paged
        attention -> greedy sampling, postprocess, metrics. Returns the schedule."""
        # BEGIN SOLUTION
        out = self.scheduler.schedule()
        self.num_steps += 1
        self.metrics_.num_steps = self.num_steps
        self.metrics_.num_preemptions += len(out.preempted)
        if out.is_empty:
            self._record_utilisation()
            return out
        for src, dst in out.copies:  # copy-on-write: the new block starts as a copy of the shared one
            for kc, vc in zip(self.key_caches, self.value_caches):
                kc[dst] = kc[src]
                vc[dst] = vc[src]
        tokens, positions, slots, block_tables, context_lens, last_rows = self._prepare_inputs(out)

        def attend(layer, q, k, v, _positions):
            kc, vc = self.key_caches[layer], self.value_caches[layer]
            write_kv(k, v, kc, vc, slots)
            return paged_attention(q, kc, vc, block_tables, context_lens, self.model.scale)

        logits = self.model.forward(tokens, positions, attend)
        for seq, row in zip(out.decodes + out.prefills, last_rows):
            token = int(torch.argmax(logits[row]))
            request = self.metrics_.requests[seq.seq_id]
            if request.first_token_step is None:
                request.first_token_step = self.num_steps
            request.num_output_tokens += 1
            self.metrics_.num_generated_tokens += 1
            if self.scheduler.postprocess(seq, token):
                request.finish_step = self.num_steps
        self._record_utilisation()
        return out
        # STARTER
        # raise NotImplementedError("step: see README.md, section \"The engine\"")
        # END SOLUTION

    # ------------------------------------------------------------ metrics

    def kv_usage(self) -> tuple[int, int]:
        """(tokens stored, slots in used blocks) right now. A shared block counts once."""
        # BEGIN SOLUTION
        bm = self.block_manager
        filled: dict[int, int] = {}
        for seq in self.scheduler.running:
            table, n = bm.block_table(seq.seq_id), bm.num_tokens(seq.seq_id)
            for i, block_id in enumerate(table):
                filled[block_id] = max(filled.get(block_id, 0), min(bm.block_size, n - i * bm.block_size))
        return sum(filled.values()), len(filled) * bm.block_size
        # STARTER
        # raise NotImplementedError("kv_usage: see README.md, section \"Measuring an engine\"")
        # END SOLUTION

    def _record_utilisation(self) -> None:
        stored, allocated = self.kv_usage()
        self.metrics_.tokens_stored += stored
        self.metrics_.slots_allocated += allocated
        self.metrics_.slots_reserved += len(self.scheduler.running) * self.config.max_model_len

    def metrics(self) -> EngineMetrics:
        return self.metrics_
