"""Part engine: many concurrent requests through scheduler + paged cache give the
same greedy tokens as decoding each request alone with a contiguous KV cache -
with and without prefix caching, and with preemption forced by a small pool
(GRADING.md invariants 7 and 9). Metrics are recomputed by the grader step by
step; on a mixed workload KV utilisation must reach 95%."""

import collections
import functools
import random

import pytest
from roadmap_cli.grading_kit import seeded

import adapter
from reference import decode_contiguous, make_model
from report import expect, require, section

BLOCK_SIZE = 4
MAX_STEPS = 2000


def _model(**overrides):
    return _models(tuple(sorted(overrides.items())))


@functools.lru_cache(maxsize=None)
def _models(items):
    return make_model(dict(items))


ENGINE = "The engine"
METRICS = "Measuring an engine"


def _workload(name: str, n: int, vocab: int = 97, max_tokens: tuple[int, int] = (1, 14)):
    """Prompts made of block-sized pieces (so they share prefixes, and share equal
    blocks after different prefixes) plus a random tail; staggered arrivals. With
    p = 0.2 a request repeats an earlier prompt cut to a block-aligned length (a fully
    cached prompt once the earlier one has run: its last token must be recomputed)."""
    rng = random.Random(seeded(name))
    pieces = [[rng.randrange(vocab) for _ in range(BLOCK_SIZE)] for _ in range(4)]
    requests = []
    for _ in range(n):
        if requests and rng.random() < 0.2:
            earlier = rng.choice(requests)[1]
            aligned = len(earlier) // BLOCK_SIZE * BLOCK_SIZE
            prompt = list(earlier[:aligned]) if aligned else list(earlier)
        else:
            prompt = [t for _ in range(rng.randrange(0, 5)) for t in rng.choice(pieces)]
            prompt += [rng.randrange(vocab) for _ in range(rng.randrange(1, 7))]
        requests.append((rng.randrange(0, 6), prompt, rng.randrange(*max_tokens)))  # (arrival, prompt, max_tokens)
    return sorted(requests, key=lambda r: r[0])


@functools.lru_cache(maxsize=None)
def _alone(prompt: tuple, max_tokens: int, scale=None) -> list[int]:
    model = _model() if scale is None else make_model({}, scale)
    return decode_contiguous(model, list(prompt), max_tokens)


def _run(config, requests, scale=None):
    result = adapter.run_engine(config, requests, None, scale)
    require(result["error"] is None, f"the engine raised {result['error']} (engine config {config})", ENGINE)
    return result


SCENARIOS = {
    # name: (engine config, workload size, max_tokens range, must preempt, attention scale)
    "no-prefix-caching": (dict(num_blocks=96, enable_prefix_caching=False, max_num_seqs=8), 16, (1, 14), False, None),
    "prefix-caching": (dict(num_blocks=96, enable_prefix_caching=True, max_num_seqs=3, max_num_batched_tokens=40),
                       16, (1, 14), False, None),
    # The longest request (22-token prompt + 19 outputs) needs 11 of the 12 blocks: growing
    # sequences must preempt each other.
    "preemption": (dict(num_blocks=12, enable_prefix_caching=True, max_num_seqs=6), 12, (8, 20), True, None),
    "preemption-no-caching": (dict(num_blocks=12, enable_prefix_caching=False, max_num_seqs=6), 12, (8, 20), True,
                              None),
    # A model whose attention scale is not head_dim ** -0.5: the engine must pass model.scale.
    "model-scale": (dict(num_blocks=64, enable_prefix_caching=True, max_num_seqs=4), 6, (2, 8), False, 0.9),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_outputs_equal_decoding_each_request_alone(scenario):
    config, n, max_tokens, must_preempt, scale = SCENARIOS[scenario]
    config = dict(dict(block_size=BLOCK_SIZE, max_num_batched_tokens=64), **config)
    requests = _workload(f"engine-{scenario}", n, max_tokens=max_tokens)
    result = _run(config, requests, scale)
    for index, (arrival, prompt, max_tokens) in enumerate(requests):
        want = _alone(tuple(prompt), max_tokens, scale)
        got = result["outputs"][index]
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise AssertionError(
                f"greedy output of request {index} (arrives at step {arrival}, {len(prompt)}-token prompt, "
                f"{'fully cached at admission, ' if result['cached'].get(result['ids'][index], 0) >= len(prompt) else ''}"
                f"engine {config}): expected {want} (decoding it alone with a contiguous cache), got {got}; "
                f"first difference at output {first} ({section(ENGINE)})")
    metrics = result["metrics"]
    if must_preempt:
        require(metrics["num_preemptions"] > 0, "this pool was meant to force preemption (test is too weak)", ENGINE)
    if scenario == "prefix-caching":        # 0/200 seeds without a hit; the small model-scale workload can have none
        require(sum(result["cached"].values()) > 0, "expected prefix-cache hits in this workload, the engine "
                                                    "reported 0 cached tokens", "Prefix caching")
    expect("free blocks after every request finished", config["num_blocks"], result["free_end"], ENGINE,
           "blocks leaked")


# Two equal block-aligned prompts admitted in one step share both prompt blocks (the
# second hits the first's) while a third request queues behind them (max_num_seqs 2):
# a shared block, a TTFT longer than one step and TPOT over several outputs, every run.
SHARED_PROMPT = [11, 12, 13, 14, 15, 16, 17, 18]
METRIC_WORKLOADS = {
    "mixed": lambda: (_workload("engine-metrics", 10),
                      dict(block_size=BLOCK_SIZE, num_blocks=40, max_num_seqs=4, max_num_batched_tokens=48,
                           max_model_len=64)),
    "shared-prefix": lambda: ([(0, SHARED_PROMPT, 4), (0, SHARED_PROMPT, 4), (0, [21, 22, 23], 3)],
                              dict(block_size=BLOCK_SIZE, num_blocks=16, max_num_seqs=2, max_num_batched_tokens=48,
                                   max_model_len=64, enable_prefix_caching=True)),
}


@pytest.mark.parametrize("workload", list(METRIC_WORKLOADS))
def test_metrics_in_steps(workload):
    """TTFT/TPOT per request, tokens per step and KV utilisation, recomputed by the grader."""
    requests, config = METRIC_WORKLOADS[workload]()
    result = _run(config, requests)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    count: dict[int, int] = {}
    usage = {"stored": 0, "allocated": 0, "reserved": 0}
    for step in result["steps"]:
        for seq_id, n in step["counts"].items():
            if n != count.get(seq_id, 0):          # this step produced a token for seq_id
                first.setdefault(seq_id, step["num_steps"])
                last[seq_id], count[seq_id] = step["num_steps"], n
        filled: dict[int, int] = {}                # block -> tokens stored in it (shared blocks once)
        for table, n in step["running"]:
            for i, b in enumerate(table):
                filled[b] = max(filled.get(b, 0), min(BLOCK_SIZE, n - i * BLOCK_SIZE))
        usage["stored"] += sum(filled.values())
        usage["allocated"] += BLOCK_SIZE * len(filled)
        usage["reserved"] += 64 * len(step["running"])
    metrics = result["metrics"]
    total = sum(len(o) for o in result["outputs"].values())
    expect("metrics().num_steps", result["engine_num_steps"], metrics["num_steps"], METRICS)
    expect("metrics().num_generated_tokens", total, metrics["num_generated_tokens"], METRICS)
    _approx("metrics().tokens_per_step", total / result["engine_num_steps"], metrics["tokens_per_step"])
    for seq_id, arrival in result["arrivals"].items():
        ttft, tpot = metrics["requests"][seq_id]
        expect(f"TTFT of request {seq_id} in steps (first-token step {first[seq_id]} - arrival step {arrival})",
               first[seq_id] - arrival, ttft, METRICS)
        want_tpot = (last[seq_id] - first[seq_id]) / (count[seq_id] - 1) if count[seq_id] > 1 else 0.0
        _approx(f"TPOT of request {seq_id} in steps ({count[seq_id]} outputs, steps {first[seq_id]}..{last[seq_id]})",
                want_tpot, tpot)
    _approx("KV utilisation (tokens stored / slots in used blocks, summed over steps)",
            usage["stored"] / usage["allocated"], metrics["kv_utilisation"])
    _approx("reserved utilisation (tokens stored / running x max_model_len, summed over steps)",
            usage["stored"] / usage["reserved"], metrics["reserved_utilisation"])


def _approx(quantity, want, got):
    require(got is not None and got == pytest.approx(want), f"{quantity}: expected {want:.6g}, got {got}", METRICS)


def test_mixed_workload_kv_utilisation(record_perf):
    """Paging wastes under one block per sequence: >= 95% of allocated slots hold
    tokens, against reserving max_model_len slots per request (shown side by side)."""
    rng = random.Random(seeded("engine-mixed"))
    requests = [(rng.randrange(0, 20), [rng.randrange(97) for _ in range(rng.randrange(20, 90))],
                 rng.randrange(10, 40)) for _ in range(16)]
    requests.sort(key=lambda r: r[0])
    result = _run(dict(block_size=BLOCK_SIZE, num_blocks=256, max_num_seqs=8, max_num_batched_tokens=256,
                       max_model_len=128, enable_prefix_caching=False), requests)
    metrics = result["metrics"]
    record_perf("kv_utilisation_paged", 100 * metrics["kv_utilisation"], "%")
    record_perf("kv_utilisation_reserve_max_len", 100 * metrics["reserved_utilisation"], "%", max_model_len=128)
    record_perf("tokens_per_step", metrics["tokens_per_step"], "tokens/step")
    print(f"KV utilisation: paged {100 * metrics['kv_utilisation']:.1f}% vs reserve-max-length "
          f"{100 * metrics['reserved_utilisation']:.1f}%")
    require(metrics["kv_utilisation"] >= 0.95, f"KV utilisation on a mixed workload: expected >= 0.95, got "
                                                f"{metrics['kv_utilisation']:.3f}", METRICS)
    require(metrics["reserved_utilisation"] < metrics["kv_utilisation"],
            f"reserved utilisation {metrics['reserved_utilisation']:.3f} should be below the paged "
            f"{metrics['kv_utilisation']:.3f}", METRICS)


def test_step_applies_copies_to_every_layers_key_and_value_cache():
    """Step 2 directly: the engine never forks, so copy-on-write pairs never come from
    its scheduler; the grader adds two (src, dst) pairs to the first step's
    SchedulerOutput and checks that every layer's key AND value cache copied them."""
    got = adapter.run_engine_copy_step(dict(num_blocks=32, block_size=4), [5, 6, 7, 8, 9], 3)
    require(got["error"] is None, f"the engine raised {got['error']} in a step with out.copies", ENGINE)
    want = [[True, True]] * got["n_layers"]
    for name in ("key", "value"):
        expect(f"{name} cache: dst block equals its src after a step with out.copies = two (src, dst) pairs, "
               f"per layer", want, got[name], ENGINE,
               "apply out.copies to every layer's key and value cache (cache[dst] = cache[src])")


# Fully cached prompts: B is admitted with A (it hits A's blocks in the same step), C and D arrive while A
# runs (8 and 4 cached tokens of 8 and 4: each recomputes its last token), E is cached up to a block edge.
CACHED_PROMPT = [31, 32, 33, 34, 35, 36, 37, 38]
WRITE_WORKLOADS = {
    "fully-cached": lambda: [(0, CACHED_PROMPT, 5), (0, CACHED_PROMPT, 2), (0, [41, 42, 43], 3),
                             (3, CACHED_PROMPT, 3), (3, CACHED_PROMPT[:4], 2), (4, CACHED_PROMPT[:6], 2)],
    "prefix-caching": lambda: _workload("engine-prefix-caching", 16),
}


def _slot(table, pos):
    return table[pos // BLOCK_SIZE] * BLOCK_SIZE + pos % BLOCK_SIZE


@pytest.mark.parametrize("workload", list(WRITE_WORKLOADS))
def test_fully_cached_prompt_writes_no_kv(workload):
    """Every write_kv call of a step stores exactly the step's new tokens: a decode's
    last token and a prefill's positions from num_cached_tokens on. A fully cached
    prompt recomputes its last token with slot -1: its KV is already in a (maybe
    shared) block."""
    config = dict(block_size=BLOCK_SIZE, num_blocks=96, max_num_seqs=4, max_num_batched_tokens=64,
                  enable_prefix_caching=True)
    got = adapter.run_engine_recording_writes(config, WRITE_WORKLOADS[workload]())
    require(got["error"] is None, f"the engine raised {got['error']} (engine config {config})", ENGINE)
    fully_cached = 0
    for step_no, step in enumerate(got["steps"], 1):
        sched = step["scheduled"]
        if sched is None or not (sched["decodes"] or sched["prefills"]):
            continue
        want = sorted([_slot(table, n - 1) for n, table in sched["decodes"]]
                      + [_slot(table, pos) for n, cached, table in sched["prefills"] for pos in range(cached, n)])
        fully_cached += sum(cached >= n for n, cached, _ in sched["prefills"])
        require(step["writes"], f"step {step_no}: the engine scheduled tokens but never called write_kv; "
                                f"attend(layer, q, k, v, positions) calls write_kv then paged_attention", ENGINE)
        for layer, slots in enumerate(step["writes"]):
            written = sorted(s for s in slots if s >= 0)
            if written != want:
                extra = sorted((collections.Counter(written) - collections.Counter(want)).elements())
                raise AssertionError(
                    f"step {step_no}, write_kv call {layer + 1}: stored slots {written}, expected {want} (each "
                    f"decode's last token, each prefill's positions from num_cached_tokens on; prefills as "
                    f"(len, num_cached_tokens) {[(n, c) for n, c, _ in sched['prefills']]}): "
                    + (f"slots {extra} hold cached KV; a fully cached prompt recomputes its last token but does "
                       f"not write its KV again (slot -1) " if extra else "")
                    + f"({section('Prefix caching')})")
    if workload == "fully-cached":
        require(fully_cached >= 3, f"expected at least 3 fully cached prompts in this workload, saw {fully_cached} "
                                   f"(a prompt repeating a running one's blocks is cached in full)", "Prefix caching")
