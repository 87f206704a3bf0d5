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
        raise NotImplementedError("_prepare_inputs: see README.md, section \"The engine\"")

    def step(self) -> SchedulerOutput:
        """schedule -> copy-on-write copies -> flattened forward pass with paged
        attention -> greedy sampling, postprocess, metrics. Returns the schedule."""
        raise NotImplementedError("step: see README.md, section \"The engine\"")

    # ------------------------------------------------------------ metrics

    def kv_usage(self) -> tuple[int, int]:
        """(tokens stored, slots in used blocks) right now. A shared block counts once."""
        raise NotImplementedError("kv_usage: see README.md, section \"Measuring an engine\"")

    def _record_utilisation(self) -> None:
        stored, allocated = self.kv_usage()
        self.metrics_.tokens_stored += stored
        self.metrics_.slots_allocated += allocated
        self.metrics_.slots_reserved += len(self.scheduler.running) * self.config.max_model_len

    def metrics(self) -> EngineMetrics:
        return self.metrics_
