"""Part engine: many concurrent requests through scheduler + paged cache give the
same greedy tokens as decoding each request alone with a contiguous KV cache -
with and without prefix caching, and with preemption forced by a small pool
(GRADING.md invariants 7 and 9). Metrics are recomputed by the grader step by
step; on a mixed workload KV utilisation must reach 95%."""

import functools
import random

import pytest
from roadmap_cli.grading_kit import seeded

import adapter
from reference import decode_contiguous

BLOCK_SIZE = 4
MAX_STEPS = 2000


@functools.lru_cache(maxsize=1)
def _model():
    return adapter.model()


def _workload(name: str, n: int, vocab: int = 97, max_tokens: tuple[int, int] = (1, 14)):
    """Prompts made of block-sized pieces (so they share prefixes, and share equal
    blocks after different prefixes) plus a random tail; staggered arrivals."""
    rng = random.Random(seeded(name))
    pieces = [[rng.randrange(vocab) for _ in range(BLOCK_SIZE)] for _ in range(4)]
    requests = []
    for _ in range(n):
        prompt = [t for _ in range(rng.randrange(0, 5)) for t in rng.choice(pieces)]
        prompt += [rng.randrange(vocab) for _ in range(rng.randrange(1, 7))]
        requests.append((rng.randrange(0, 6), prompt, rng.randrange(*max_tokens)))  # (arrival, prompt, max_tokens)
    return sorted(requests, key=lambda r: r[0])


@functools.lru_cache(maxsize=None)
def _alone(prompt: tuple, max_tokens: int) -> list[int]:
    return decode_contiguous(_model(), list(prompt), max_tokens)


def _drive(engine, requests, on_step=None, arrivals=None):
    """Add requests at their arrival step, step until done. Returns {request index: output}.
    `arrivals` (optional dict) gets seq_id -> engine.num_steps when it was added."""
    ids: dict[int, int] = {}
    pending = list(enumerate(requests))
    steps = 0
    while pending or engine.has_unfinished():
        while pending and pending[0][1][0] <= steps:
            index, (_, prompt, max_tokens) = pending.pop(0)
            ids[index] = engine.add_request(prompt, max_tokens)
            if arrivals is not None:
                arrivals[ids[index]] = engine.num_steps
        if engine.has_unfinished():
            engine.step()
            if on_step is not None:
                on_step(engine)
        steps += 1
        assert steps < MAX_STEPS, "the engine made no progress (leaked blocks? a stuck queue?)"
    return {index: list(engine.sequences[seq_id].output_token_ids) for index, seq_id in ids.items()}


SCENARIOS = {
    # name: (engine config, workload size, max_tokens range, must preempt)
    "no-prefix-caching": (dict(num_blocks=96, enable_prefix_caching=False, max_num_seqs=8), 16, (1, 14), False),
    "prefix-caching": (dict(num_blocks=96, enable_prefix_caching=True, max_num_seqs=8), 16, (1, 14), False),
    # The longest request (22-token prompt + 19 outputs) needs 11 of the 12 blocks: growing
    # sequences must preempt each other.
    "preemption": (dict(num_blocks=12, enable_prefix_caching=True, max_num_seqs=6), 12, (8, 20), True),
    "preemption-no-caching": (dict(num_blocks=12, enable_prefix_caching=False, max_num_seqs=6), 12, (8, 20), True),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_outputs_equal_decoding_each_request_alone(scenario):
    config, n, max_tokens, must_preempt = SCENARIOS[scenario]
    requests = _workload(f"engine-{scenario}", n, max_tokens=max_tokens)
    engine = adapter.engine(_model(), block_size=BLOCK_SIZE, max_num_batched_tokens=64, **config)
    outputs = _drive(engine, requests)
    for index, (arrival, prompt, max_tokens) in enumerate(requests):
        want = _alone(tuple(prompt), max_tokens)
        assert outputs[index] == want, (
            f"request {index} (arrives at step {arrival}, {len(prompt)}-token prompt): engine gave "
            f"{outputs[index]}, decoding it alone with a contiguous cache gives {want}")
    metrics = engine.metrics()
    if must_preempt:
        assert metrics.num_preemptions > 0, "this pool was meant to force preemption (test is too weak)"
    if config["enable_prefix_caching"] and not must_preempt:
        assert sum(s.num_cached_tokens for s in engine.sequences.values()) > 0, "no prefix-cache hit at all"
    assert engine.block_manager.num_free_blocks == config["num_blocks"], "blocks leaked after all requests finished"


def test_metrics_in_steps():
    """TTFT/TPOT per request, tokens per step and KV utilisation, recomputed by the grader."""
    requests = _workload("engine-metrics", 10)
    engine = adapter.engine(_model(), block_size=BLOCK_SIZE, num_blocks=40, max_num_seqs=4,
                            max_num_batched_tokens=48, max_model_len=64)
    arrivals: dict[int, int] = {}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    count: dict[int, int] = {}
    usage = {"stored": 0, "allocated": 0, "reserved": 0}

    def on_step(eng):
        for seq_id, seq in eng.sequences.items():
            n = len(seq.output_token_ids)
            if n != count.get(seq_id, 0):          # this step produced a token for seq_id
                first.setdefault(seq_id, eng.num_steps)
                last[seq_id], count[seq_id] = eng.num_steps, n
        bm = eng.block_manager
        filled: dict[int, int] = {}                # block -> tokens stored in it (shared blocks once)
        for seq in eng.scheduler.running:
            table, n = bm.block_table(seq.seq_id), bm.num_tokens(seq.seq_id)
            for i, b in enumerate(table):
                filled[b] = max(filled.get(b, 0), min(BLOCK_SIZE, n - i * BLOCK_SIZE))
        usage["stored"] += sum(filled.values())
        usage["allocated"] += BLOCK_SIZE * len(filled)
        usage["reserved"] += 64 * len(eng.scheduler.running)

    outputs = _drive(engine, requests, on_step, arrivals)
    metrics = engine.metrics()
    total = sum(len(o) for o in outputs.values())
    assert metrics.num_steps == engine.num_steps
    assert metrics.num_generated_tokens == total
    assert metrics.tokens_per_step == pytest.approx(total / engine.num_steps)
    for seq_id, arrival in arrivals.items():
        req = metrics.requests[seq_id]
        assert req.ttft_steps == first[seq_id] - arrival, \
            f"request {seq_id}: TTFT {req.ttft_steps} steps, expected {first[seq_id] - arrival}"
        want_tpot = (last[seq_id] - first[seq_id]) / (count[seq_id] - 1) if count[seq_id] > 1 else 0.0
        assert req.tpot_steps == pytest.approx(want_tpot), f"request {seq_id}: TPOT"
    assert metrics.kv_utilisation == pytest.approx(usage["stored"] / usage["allocated"])
    assert metrics.reserved_utilisation == pytest.approx(usage["stored"] / usage["reserved"])


def test_mixed_workload_kv_utilisation(record_perf):
    """Paging wastes under one block per sequence: >= 95% of allocated slots hold
    tokens, against reserving max_model_len slots per request (shown side by side)."""
    rng = random.Random(seeded("engine-mixed"))
    requests = [(rng.randrange(0, 20), [rng.randrange(97) for _ in range(rng.randrange(20, 90))],
                 rng.randrange(10, 40)) for _ in range(16)]
    requests.sort(key=lambda r: r[0])
    engine = adapter.engine(_model(), block_size=BLOCK_SIZE, num_blocks=256, max_num_seqs=8,
                            max_num_batched_tokens=256, max_model_len=128, enable_prefix_caching=False)
    _drive(engine, requests)
    metrics = engine.metrics()
    record_perf("kv_utilisation_paged", 100 * metrics.kv_utilisation, "%")
    record_perf("kv_utilisation_reserve_max_len", 100 * metrics.reserved_utilisation, "%", max_model_len=128)
    record_perf("tokens_per_step", metrics.tokens_per_step, "tokens/step")
    print(f"KV utilisation: paged {100 * metrics.kv_utilisation:.1f}% vs reserve-max-length "
          f"{100 * metrics.reserved_utilisation:.1f}%")
    assert metrics.kv_utilisation >= 0.95, f"KV utilisation {metrics.kv_utilisation:.3f} < 0.95"
    assert metrics.reserved_utilisation < metrics.kv_utilisation
