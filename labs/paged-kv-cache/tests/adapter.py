"""The only door from the grader to the learner's code (workspace modules
block_manager, paged_attention, triton_paged_attention, scheduler, model, engine).

The learner's modules import each other by name (`from block_manager import
BlockManager`); `learner_module` puts the workspace first on sys.path so they
always resolve to the workspace's files.
"""

from __future__ import annotations

from roadmap_cli import grading_kit as kit


def _module(name: str):
    return kit.learner_module(name)


# ---------------------------------------------------------------- block manager

def block_manager(num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
    return _module("block_manager").BlockManager(num_blocks, block_size, enable_prefix_caching)


# ---------------------------------------------------------------- paged attention (torch)

def compute_slot_mapping(block_table, start: int, end: int, block_size: int) -> list[int]:
    return [int(s) for s in _module("paged_attention").compute_slot_mapping(list(block_table), start, end, block_size)]


def write_kv(key, value, key_cache, value_cache, slot_mapping) -> None:
    with kit.inputs_unchanged(key, value, slot_mapping, what="key/value/slot_mapping"):
        _module("paged_attention").write_kv(key, value, key_cache, value_cache, slot_mapping)


def paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale):
    # The point of the part is reading through block tables: no SDPA shortcut.
    with kit.forbid_torch_ops("sdpa"), kit.inputs_unchanged(
            query, key_cache, value_cache, block_tables, context_lens, what="paged_attention input"):
        return _module("paged_attention").paged_attention(query, key_cache, value_cache, block_tables,
                                                          context_lens, scale)


# ---------------------------------------------------------------- paged attention (Triton)

KERNEL_FORBIDDEN = ("sdpa", "softmax", "matmul", "mm", "bmm", "einsum")


def triton_paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale):
    """The learner's Triton kernel; torch may not do the math, a kernel must launch."""
    with kit.forbid_torch_ops(*KERNEL_FORBIDDEN), kit.inputs_unchanged(
            query, key_cache, value_cache, block_tables, context_lens, what="paged_attention input"), \
            kit.count_triton_launches() as launches:
        out = _module("triton_paged_attention").paged_attention(query, key_cache, value_cache, block_tables,
                                                                context_lens, scale)
    if launches.count < 1:
        raise AssertionError("triton_paged_attention.paged_attention launched no Triton kernel")
    return out


def triton_paged_attention_plain(query, key_cache, value_cache, block_tables, context_lens, scale):
    """Unguarded, for timing (the guards cost host time)."""
    return _module("triton_paged_attention").paged_attention(query, key_cache, value_cache, block_tables,
                                                            context_lens, scale)


# ---------------------------------------------------------------- scheduler

def scheduler(max_num_seqs: int, max_num_batched_tokens: int, block_manager_):
    mod = _module("scheduler")
    return mod.Scheduler(mod.SchedulerConfig(max_num_seqs=max_num_seqs,
                                             max_num_batched_tokens=max_num_batched_tokens), block_manager_)


def sequence(seq_id: int, prompt_token_ids, max_tokens: int):
    return _module("scheduler").Sequence(seq_id, list(prompt_token_ids), max_tokens)


# ---------------------------------------------------------------- model and engine

def model(**overrides):
    mod = _module("model")
    return mod.TinyTransformer(mod.ModelConfig(**overrides))


def engine(model_, **config):
    mod = _module("engine")
    return mod.LLMEngine(model_, mod.EngineConfig(**config))
