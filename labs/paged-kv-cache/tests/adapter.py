"""The only door from the grader to the learner's code (workspace modules
block_manager, paged_attention, triton_paged_attention, scheduler, engine).

Every function marked `@learner_side` runs in the learner process when the
engine's sandbox is active (in-process otherwise). Each one drives the learner's
code through a whole scenario and returns only plain data (ints, lists, dicts,
tensors): recorded states, outputs, launch counts, out-of-bounds reports. The
tests compare those facts with the grader's references in the grader process;
nothing here decides pass or fail.

Learner objects (a BlockManager, a Scheduler, an engine) never leave the learner
process: a trace of 150 block-manager operations is one call, not 150.
"""

from __future__ import annotations

import os
import sys
import traceback

from roadmap_cli import grading_kit as kit

# The lab's learner-side modules (grader_model, engine_model: lab.yaml `learner_side`) import from this
# folder, the engine's adapter shim under the sandbox; appended, so the workspace's own modules always win.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.append(_HERE)

learner_side = kit.learner_side


def _module(name: str):
    return kit.learner_module(name)


def _describe_error(exc: BaseException) -> str:
    """'ValueError: message (block_manager.py:123 in allocate)': the learner's innermost frame."""
    root = str(kit.workspace())
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(root)]
    where = f" ({os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _plain(value):
    """Learner return values as plain Python data (numpy/torch ints become int)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    try:
        return int(value)
    except (TypeError, ValueError):
        return repr(value)


def _changed(names_and_tensors, clones) -> list[str]:
    import torch

    return [name for (name, t), c in zip(names_and_tensors, clones) if not torch.equal(t.detach(), c)]


# ---------------------------------------------------------------- block manager

def _bm_state(bm, num_blocks: int, seq_ids) -> dict:
    state = {
        "free": [int(b) for b in bm.free_block_ids()],
        "num_free": int(bm.num_free_blocks),
        "ref": [int(bm.ref_count(b)) for b in range(num_blocks)],
        "hashed": [bm.block_hash(b) is not None for b in range(num_blocks)],
        "tables": {}, "num_tokens": {},
    }
    for s in seq_ids:
        if bm.has_seq(s):
            state["tables"][s] = [int(b) for b in bm.block_table(s)]
            state["num_tokens"][s] = int(bm.num_tokens(s))
    return state


@learner_side
def run_block_manager(num_blocks: int, block_size: int, caching: bool, ops: list) -> list[dict]:
    """Run `ops` on a fresh learner BlockManager. Returns len(ops) + 1 records: the
    initial state, then after each op {"result", "error", and the state}. Stops at
    the first exception (recorded as text with the learner's file:line).

    ops: ("allocate", seq, tokens) | ("append", seq, token) | ("fork", parent, child)
         | ("free", seq) | ("can_allocate", tokens) | ("can_append", seq)
    """
    seq_ids: set[int] = set()
    try:
        bm = _module("block_manager").BlockManager(num_blocks, block_size, caching)
        records = [dict(result=None, error=None, **_bm_state(bm, num_blocks, seq_ids))]
    except Exception as exc:  # noqa: BLE001 - reported to the test as data
        return [dict(result=None, error=_describe_error(exc))]
    for op in ops:
        kind, *args = op
        try:
            if kind == "allocate":
                seq_ids.add(args[0])
                result = bm.allocate(args[0], list(args[1]))
            elif kind == "append":
                result = bm.append(args[0], args[1])
            elif kind == "fork":
                seq_ids.add(args[1])
                result = bm.fork(args[0], args[1])
            elif kind == "free":
                result = bm.free(args[0])
            elif kind == "can_allocate":
                result = bool(bm.can_allocate(list(args[0])))
            elif kind == "can_append":
                result = bool(bm.can_append(args[0]))
            else:
                raise ValueError(f"unknown op {kind}")
            records.append(dict(result=_plain(result), error=None, **_bm_state(bm, num_blocks, seq_ids)))
        except Exception as exc:  # noqa: BLE001
            records.append(dict(result=None, error=_describe_error(exc)))
            break
    return records


# ---------------------------------------------------------------- paged attention (torch)

@learner_side
def compute_slot_mapping(block_table, start: int, end: int, block_size: int) -> list[int]:
    return [int(s) for s in _module("paged_attention").compute_slot_mapping(list(block_table), start, end, block_size)]


@learner_side
def write_kv(key, value, key_cache, value_cache, slot_mapping):
    """Returns (key_cache, value_cache) after the learner's in-place write, the
    names of inputs it modified (key/value/slot_mapping must stay unchanged), and
    the names of the caches whose storage it rebound (`.data = ...`, `set_`):
    the same tensor object with new contents, which a view taken before the call
    (as the engine's per-layer caches are) never sees."""
    import torch

    watched = [("key", key), ("value", value), ("slot_mapping", slot_mapping)]
    clones = [t.clone() for _, t in watched]
    # `cache[...]` is a view of the cache's storage as it is now, whatever its layout.
    caches = [("key_cache", key_cache, key_cache.untyped_storage().data_ptr(), key_cache[...]),
              ("value_cache", value_cache, value_cache.untyped_storage().data_ptr(), value_cache[...])]
    _module("paged_attention").write_kv(key, value, key_cache, value_cache, slot_mapping)
    rebound = [name for name, cache, ptr, before in caches
               if cache.untyped_storage().data_ptr() != ptr or not torch.equal(before, cache)]
    return key_cache, value_cache, _changed(watched, clones), rebound


@learner_side
def write_kv_into_buffers(key, value, key_buffer, value_buffer, slot_mapping):
    """write_kv on caches that are non-contiguous views, taken here, in the learner's
    process (tensors cross the process boundary as copies): key_cache =
    key_buffer[..., :head_dim] (padded rows), value_cache = value_buffer.transpose(1, 2)
    (a heads-outer buffer). Returns the two buffers after the call, the names of
    modified inputs and of rebound caches."""
    head_dim = key.shape[-1]
    key_cache, value_cache = key_buffer[..., :head_dim], value_buffer.transpose(1, 2)
    _, _, changed, rebound = write_kv(key, value, key_cache, value_cache, slot_mapping)
    return key_buffer, value_buffer, changed, rebound


@learner_side
def paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale):
    """Returns (out, names of modified inputs). SDPA is forbidden: the point is the block table."""
    watched = [("query", query), ("key_cache", key_cache), ("value_cache", value_cache),
               ("block_tables", block_tables), ("context_lens", context_lens)]
    clones = [t.clone() for _, t in watched]
    with kit.forbid_torch_ops("sdpa"):
        out = _module("paged_attention").paged_attention(query, key_cache, value_cache, block_tables,
                                                         context_lens, scale)
    return out, _changed(watched, clones)


# ---------------------------------------------------------------- paged attention (Triton)

KERNEL_FORBIDDEN = ("sdpa", "softmax", "matmul", "mm", "bmm", "einsum")

# Names used in out-of-bounds messages (bounds.check_bounds labels).
CACHE_LABELS = {"key_cache": "the key cache", "value_cache": "the value cache",
                "block_tables": "the block table", "context_lens": "context_lens", "query": "the query"}


@learner_side
def triton_paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale, guard_elems=0):
    """The learner's Triton kernel. torch may not do the math; a kernel must launch.

    With guard_elems > 0 every input is copied into a NaN-filled buffer with at
    least guard_elems NaN elements on both sides (bounds.nan_guarded; the copies
    stay contiguous and int32, so the given launcher passes them through without a
    copy), and under the interpreter every unmasked load/store lane is checked
    against the launch's tensors (bounds.check_bounds).

    Returns {"out", "launches", "changed", "violations", "checked"} (plain data)."""
    from roadmap_cli.grading_kit import bounds

    tensors = {"query": query, "key_cache": key_cache, "value_cache": value_cache,
               "block_tables": block_tables, "context_lens": context_lens}
    if guard_elems:
        tensors = {name: bounds.nan_guarded(t, guard=guard_elems, row_pad=0) for name, t in tensors.items()}
    clones = {name: t.clone() for name, t in tensors.items()}
    labels = bounds.storage_labels(**{CACHE_LABELS[n]: t for n, t in tensors.items()})
    with kit.forbid_torch_ops(*KERNEL_FORBIDDEN), kit.count_triton_launches() as launches, \
            bounds.check_bounds(labels=labels) as report:
        out = _module("triton_paged_attention").paged_attention(
            tensors["query"], tensors["key_cache"], tensors["value_cache"], tensors["block_tables"],
            tensors["context_lens"], scale)
    changed = [n for n, t in tensors.items() if not _same(t, clones[n])]
    plain = report.as_plain()
    return {"out": out.detach().cpu().clone(), "launches": launches.count, "changed": changed,
            "violations": plain["violations"], "checked": plain["checked_accesses"]}


def _same(a, b) -> bool:
    import torch

    return torch.equal(torch.nan_to_num(a.detach(), nan=0.0), torch.nan_to_num(b.detach(), nan=0.0)) \
        and torch.equal(torch.isnan(a) if a.is_floating_point() else a, torch.isnan(b) if b.is_floating_point() else b)


@learner_side
def time_paged_vs_sdpa(shape, dtype_name: str = "float16") -> dict:
    """CUDA only: time the learner's kernel against SDPA over a contiguous cache
    (GRADING.md timing rules, shared harness). Returns the comparison as plain data."""
    import torch
    import torch.nn.functional as F
    from roadmap_cli.grading_kit import timing

    dtype = getattr(torch, dtype_name)
    num_seqs, num_heads, num_kv_heads, head_dim, context_len, block_size = shape
    blocks_per_seq = context_len // block_size
    num_blocks = num_seqs * blocks_per_seq
    q = torch.randn(num_seqs, num_heads, head_dim, device="cuda", dtype=dtype)
    kc = torch.randn(num_blocks, block_size, num_kv_heads, head_dim, device="cuda", dtype=dtype)
    vc = torch.randn_like(kc)
    tables = torch.randperm(num_blocks, device="cuda").view(num_seqs, blocks_per_seq).to(torch.int32)
    lens = torch.full((num_seqs,), context_len, device="cuda", dtype=torch.int32)
    # Contiguous (num_seqs, kv_heads, context_len, head_dim): what a non-paged server would hold.
    k = kc[tables.long()].reshape(num_seqs, context_len, num_kv_heads, head_dim).transpose(1, 2).contiguous()
    v = vc[tables.long()].reshape(num_seqs, context_len, num_kv_heads, head_dim).transpose(1, 2).contiguous()
    scale = head_dim ** -0.5
    kernel = _module("triton_paged_attention").paged_attention

    def paged(q_):
        return kernel(q_, kc, vc, tables, lens, scale)

    def contiguous(q_):
        # (S, H, 1, D) query over (S, KVH, L, D) keys: one decode step, GQA by SDPA.
        return F.scaled_dot_product_attention(q_.unsqueeze(2), k, v, scale=scale,
                                              enable_gqa=num_heads != num_kv_heads).squeeze(2)

    def check(out, args):
        torch.testing.assert_close(out, contiguous(*args), atol=2e-2, rtol=2e-2)

    # Bytes read: all of K and V once, plus q and out (memory-bound kernel).
    bytes_moved = 2 * num_seqs * context_len * num_kv_heads * head_dim * 2 + 2 * q.numel() * 2
    flops = 4.0 * num_seqs * num_heads * context_len * head_dim
    result = timing.compare_to_baseline(paged, contiguous, lambda: torch.randn_like(q), flops=flops,
                                        bytes_moved=bytes_moved, dtype=dtype, rule=timing.StopRule(time_cap_s=2.0),
                                        check=check)
    return {"learner_ms": float(result.learner.median_ms), "baseline_ms": float(result.baseline.median_ms),
            "ratio": float(result.ratio), "pct_of_peak": result.pct_of_peak, "impossible": bool(result.impossible),
            "summary": str(result.summary())}


# ---------------------------------------------------------------- scheduler

def _seq_ids(seqs) -> list[int]:
    return [int(s.seq_id) for s in seqs]


@learner_side
def run_scheduler(num_blocks: int, block_size: int, caching: bool, max_num_seqs: int,
                  max_num_batched_tokens: int, requests: list, arrivals: list, max_steps: int = 2000) -> dict:
    """Drive the learner's Scheduler over its own BlockManager with a fake model.

    requests[i] = (prompt, max_tokens, sampled): request i gets seq_id i; its k-th
    output token is sampled[k] (the grader chose them: no model needed).
    arrivals[step] = how many more requests are added before that step (after the
    list ends, all the rest). Returns {"steps": [record per step], "error", "free_end"}.
    """
    sched_mod, bm_mod = _module("scheduler"), _module("block_manager")
    steps: list[dict] = []
    try:
        bm = bm_mod.BlockManager(num_blocks, block_size, caching)
        sched = sched_mod.Scheduler(sched_mod.SchedulerConfig(max_num_seqs=max_num_seqs,
                                                              max_num_batched_tokens=max_num_batched_tokens), bm)
        seqs = [sched_mod.Sequence(i, list(p), m) for i, (p, m, _) in enumerate(requests)]
        added = 0
        while added < len(seqs) or sched.has_unfinished():
            step = len(steps)
            if step >= max_steps:
                return {"steps": steps, "error": f"no progress after {max_steps} steps", "free_end": None}
            n_new = arrivals[step] if step < len(arrivals) else len(seqs)
            for seq in seqs[added:added + n_new]:
                sched.add(seq)
            added = min(len(seqs), added + n_new)
            record = {"before_running": _seq_ids(sched.running), "before_waiting": _seq_ids(sched.waiting)}
            steps.append(record)
            out = sched.schedule()
            scheduled = list(out.decodes) + list(out.prefills)
            record.update(
                prefills=_seq_ids(out.prefills), decodes=_seq_ids(out.decodes), preempted=_seq_ids(out.preempted),
                copies=[tuple(int(x) for x in c) for c in out.copies], num_batched_tokens=int(out.num_batched_tokens),
                cached={int(s.seq_id): int(s.num_cached_tokens) for s in out.prefills},
                lens={int(s.seq_id): len(s.token_ids) for s in scheduled},
                bm_tokens={int(s.seq_id): int(bm.num_tokens(s.seq_id)) if bm.has_seq(s.seq_id) else None
                           for s in scheduled},
                preempted_hold=[int(s.seq_id) for s in out.preempted if bm.has_seq(s.seq_id)],
                # Each preempted sequence as it waits: (status name, num_cached_tokens), read right after schedule().
                preempted_state={int(s.seq_id): (str(getattr(s.status, "name", s.status)), int(s.num_cached_tokens))
                                 for s in out.preempted},
                after_running=_seq_ids(sched.running), after_waiting=_seq_ids(sched.waiting),
                free_after_schedule=int(bm.num_free_blocks))
            finished = []
            for s in scheduled:
                token = requests[s.seq_id][2][len(s.output_token_ids)]
                if sched.postprocess(s, token):
                    finished.append(int(s.seq_id))
            record["finished"] = finished
            record["running_end"] = _seq_ids(sched.running)
        return {"steps": steps, "error": None, "free_end": int(bm.num_free_blocks)}
    except Exception as exc:  # noqa: BLE001
        return {"steps": steps, "error": _describe_error(exc), "free_end": None}


# ---------------------------------------------------------------- engine

@learner_side
def run_engine(engine_config: dict, requests: list, model_config: dict | None = None, scale: float | None = None,
               max_steps: int = 2000) -> dict:
    """Run the learner's LLMEngine on the grader's copy of the model (grader_model.py,
    optionally with another attention scale: engine_model.ScaledModel).

    requests[i] = (arrival_step, prompt, max_tokens), sorted by arrival; request i
    is added when `steps` driver steps have run. Returns plain data: outputs per
    request, per-step facts (output counts, running block tables), the engine's
    metrics, and any error."""
    import engine_model

    engine_mod = _module("engine")
    model = engine_model.make_model(model_config or {}, scale)
    result = {"outputs": {}, "ids": {}, "arrivals": {}, "steps": [], "metrics": None, "error": None,
              "free_end": None, "cached": {}}
    try:
        engine = engine_mod.LLMEngine(model, engine_mod.EngineConfig(**engine_config))
        pending = list(enumerate(requests))
        steps = 0
        while pending or engine.has_unfinished():
            while pending and pending[0][1][0] <= steps:
                index, (_, prompt, max_tokens) = pending.pop(0)
                seq_id = int(engine.add_request(list(prompt), max_tokens))
                result["ids"][index] = seq_id
                result["arrivals"][seq_id] = int(engine.num_steps)
            if engine.has_unfinished():
                out = engine.step()
                for s in out.prefills:
                    result["cached"][int(s.seq_id)] = max(result["cached"].get(int(s.seq_id), 0),
                                                          int(s.num_cached_tokens))
                bm = engine.block_manager
                result["steps"].append({
                    "num_steps": int(engine.num_steps),
                    "counts": {int(i): len(s.output_token_ids) for i, s in engine.sequences.items()},
                    "running": [([int(b) for b in bm.block_table(s.seq_id)], int(bm.num_tokens(s.seq_id)))
                                for s in engine.scheduler.running],
                })
            steps += 1
            if steps >= max_steps:
                result["error"] = f"the engine made no progress in {max_steps} steps (leaked blocks? a stuck queue?)"
                break
        result["outputs"] = {index: [int(t) for t in engine.sequences[seq_id].output_token_ids]
                             for index, seq_id in result["ids"].items()}
        m = engine.metrics()
        result["metrics"] = {
            "num_steps": int(m.num_steps), "num_generated_tokens": int(m.num_generated_tokens),
            "num_preemptions": int(m.num_preemptions), "tokens_per_step": float(m.tokens_per_step),
            "kv_utilisation": float(m.kv_utilisation), "reserved_utilisation": float(m.reserved_utilisation),
            "requests": {int(i): (None if r.ttft_steps is None else int(r.ttft_steps),
                                  None if r.tpot_steps is None else float(r.tpot_steps))
                         for i, r in m.requests.items()},
        }
        result["engine_num_steps"] = int(engine.num_steps)
        result["free_end"] = int(engine.block_manager.num_free_blocks)
    except Exception as exc:  # noqa: BLE001
        result["error"] = _describe_error(exc)
    return result


@learner_side
def run_engine_recording_writes(engine_config: dict, requests: list, max_steps: int = 2000) -> dict:
    """Run the learner's LLMEngine like run_engine and record, per step, what was
    scheduled (each decode's and prefill's length, num_cached_tokens and block
    table, taken when schedule() returns) and the slot_mapping of every write_kv
    call the step made (the handout's `attend` calls write_kv; the engine module's
    own name and paged_attention.write_kv are both wrapped). Plain data only."""
    import engine_model

    engine_mod = _module("engine")
    pa_mod = _module("paged_attention")
    result = {"steps": [], "error": None}
    writes: list[list[int]] = []
    original = pa_mod.write_kv

    def recording_write_kv(key, value, key_cache, value_cache, slot_mapping):
        writes.append([int(s) for s in slot_mapping.reshape(-1).tolist()])
        return original(key, value, key_cache, value_cache, slot_mapping)

    try:
        pa_mod.write_kv = recording_write_kv
        if getattr(engine_mod, "write_kv", None) is original:
            engine_mod.write_kv = recording_write_kv
        engine = engine_mod.LLMEngine(engine_model.make_model({}, None), engine_mod.EngineConfig(**engine_config))
        bm = engine.block_manager
        schedule, scheduled = engine.scheduler.schedule, []

        def recording_schedule():
            out = schedule()
            scheduled.append({
                "decodes": [(len(s.token_ids), [int(b) for b in bm.block_table(s.seq_id)]) for s in out.decodes],
                "prefills": [(len(s.token_ids), int(s.num_cached_tokens), [int(b) for b in bm.block_table(s.seq_id)])
                             for s in out.prefills],
            })
            return out

        engine.scheduler.schedule = recording_schedule
        pending = list(requests)
        steps = 0
        while pending or engine.has_unfinished():
            while pending and pending[0][0] <= steps:
                _, prompt, max_tokens = pending.pop(0)
                engine.add_request(list(prompt), max_tokens)
            if engine.has_unfinished():
                del scheduled[:], writes[:]
                engine.step()
                result["steps"].append({"scheduled": scheduled[-1] if scheduled else None,
                                        "writes": [list(w) for w in writes]})
            steps += 1
            if steps >= max_steps:
                result["error"] = f"the engine made no progress in {max_steps} steps (leaked blocks? a stuck queue?)"
                break
    except Exception as exc:  # noqa: BLE001
        result["error"] = _describe_error(exc)
    finally:
        pa_mod.write_kv = original
        if getattr(engine_mod, "write_kv", None) is recording_write_kv:
            engine_mod.write_kv = original
    return result


@learner_side
def run_engine_copy_step(engine_config: dict, prompt: list, max_tokens: int, n_copies: int = 2) -> dict:
    """Step 2 of one `step()` on its own. LLMEngine never forks, so the scheduler never
    returns copies; here the first schedule() output gets `n_copies` (src, dst) pairs
    added, between blocks a fake sequence holds in the block manager (no request reads
    or writes them). Before the step every layer's src blocks hold distinct random K and
    V and the dst blocks zeros. Returns, per layer, whether each dst block of the key
    and the value cache equals its src after the step, and any error."""
    import dataclasses

    import torch

    import engine_model

    engine_mod = _module("engine")
    result = {"key": [], "value": [], "n_layers": 0, "error": None}
    try:
        engine = engine_mod.LLMEngine(engine_model.make_model({}, None), engine_mod.EngineConfig(**engine_config))
        bm, block_size = engine.block_manager, int(engine_config.get("block_size", 4))
        holder = 10**9                                        # a seq_id no request gets
        # Distinct tokens, so no block is a prefix-cache hit for the request or for each other.
        bm.allocate(holder, [100000 + i for i in range(2 * n_copies * block_size)])
        reserved = [int(b) for b in bm.block_table(holder)]
        pairs = [(reserved[2 * i], reserved[2 * i + 1]) for i in range(n_copies)]
        gen = torch.Generator().manual_seed(1234)
        for kc, vc in zip(engine.key_caches, engine.value_caches):
            for src, dst in pairs:
                kc[src] = torch.randn(kc[src].shape, generator=gen, dtype=torch.float64).to(kc.dtype)
                vc[src] = torch.randn(vc[src].shape, generator=gen, dtype=torch.float64).to(vc.dtype)
                kc[dst] = 0
                vc[dst] = 0
        engine.add_request(list(prompt), max_tokens)
        schedule, injected = engine.scheduler.schedule, []

        def schedule_with_copies():
            out = schedule()
            if not injected:
                injected.append(True)
                out = dataclasses.replace(out, copies=list(out.copies) + pairs)
            return out

        engine.scheduler.schedule = schedule_with_copies
        engine.step()
        result["n_layers"] = len(engine.key_caches)
        for name, caches in (("key", engine.key_caches), ("value", engine.value_caches)):
            result[name] = [[bool(torch.equal(c[dst], c[src])) and bool(c[src].abs().sum() > 0) for src, dst in pairs]
                            for c in caches]
    except Exception as exc:  # noqa: BLE001
        result["error"] = _describe_error(exc)
    return result
