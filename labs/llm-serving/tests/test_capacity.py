"""Part 5: capacity planning, checked exactly against the handout's formulas
(README.md, "Part 5"; the grader's copy is reference_capacity.py)."""

from __future__ import annotations

import math
import random

import adapter
import reference_capacity as rc
from roadmap_cli import grading_kit as kit

GIB = 1 << 30
# Realistic anchors (Llama-2-7B / 70B-like, H100 80 GB) beside random cases.
FIXED = [
    dict(model=dict(n_params=6_738_415_616, n_layers=32, n_kv_heads=32, head_dim=128),
         gpu=dict(memory_bytes=80 * GIB, peak_flops=989e12, mem_util=0.9, activation_bytes=2 * GIB),
         traffic=dict(rate=20.0, prompt_tokens=1024, output_tokens=256, tpot_s=0.03, mfu=0.5), tp=1, target=0.5,
         block_size=16, max_tp=8),
    dict(model=dict(n_params=68_976_648_192, n_layers=80, n_kv_heads=8, head_dim=128),
         gpu=dict(memory_bytes=80 * GIB, peak_flops=989e12, mem_util=0.92, activation_bytes=4 * GIB),
         traffic=dict(rate=5.0, prompt_tokens=2048, output_tokens=512, tpot_s=0.05, mfu=0.4), tp=4, target=1.0,
         block_size=16, max_tp=8),
]


def _random_case(rng: random.Random) -> dict:
    n_layers, kvh = rng.choice([12, 24, 32, 40, 80]), rng.choice([1, 2, 4, 8, 32])
    return dict(
        model=dict(n_params=rng.randrange(10 ** 8, 8 * 10 ** 10), n_layers=n_layers, n_kv_heads=kvh,
                   head_dim=rng.choice([64, 128]), weight_bytes=rng.choice([1, 2, 4]), kv_bytes=rng.choice([1, 2])),
        gpu=dict(memory_bytes=rng.choice([24, 40, 48, 80, 141]) * GIB, peak_flops=rng.choice([312e12, 989e12]),
                 mem_util=rng.choice([0.8, 0.9, 0.95]), activation_bytes=rng.randrange(0, 4 * GIB)),
        traffic=dict(rate=rng.uniform(0.5, 80), prompt_tokens=rng.randrange(16, 8000),
                     output_tokens=rng.randrange(1, 2000), tpot_s=rng.uniform(0.01, 0.08), mfu=rng.uniform(0.2, 0.6)),
        tp=rng.choice([1, 2, 4, 8, 16]), target=rng.choice([0.05, 0.2, 0.5, 2.0, 10.0]),
        block_size=rng.choice([8, 16, 32]), max_tp=rng.choice([1, 2, 4, 8]))


def _expected(case: dict) -> dict:
    m, g, t = rc.ModelSpec(**case["model"]), rc.GpuSpec(**case["gpu"]), rc.Traffic(**case["traffic"])
    tp, bs = case["tp"], case["block_size"]
    return {
        "kv_bytes_per_token": rc.kv_bytes_per_token(m, tp),
        "kv_capacity_tokens": rc.kv_capacity_tokens(m, g, tp, bs),
        "max_concurrent_seqs": rc.max_concurrent_seqs(case["capacity"], case["seq_len"], bs),
        "prefill_time_s": rc.prefill_time_s(m, g, t, tp),
        "p99_ttft_s": rc.p99_ttft_s(case["service"], case["rate_per_replica"]),
        "replicas_needed": rc.replicas_needed(m, g, t, tp, case["target"], bs),
        "plan": rc.plan(m, g, t, case["target"], case["max_tp"], bs),
    }


def _same(got, want) -> bool:
    if isinstance(want, float) and isinstance(got, (int, float)):
        return math.isclose(got, want, rel_tol=1e-12) or (math.isinf(want) and got == want)
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want


def _one_sequence_case(rng: random.Random) -> dict:
    """A GPU with KV room for exactly one prompt + output sequence (1.5 of them), tp = 1."""
    case = _random_case(rng)
    case.update(tp=1, max_tp=1, target=1e6)          # TTFT is not the limit here
    case["traffic"]["rate"] = 0.01
    m = rc.ModelSpec(**case["model"])
    seq = case["traffic"]["prompt_tokens"] + case["traffic"]["output_tokens"]
    bs = case["block_size"]
    kv_bytes = rc.kv_bytes_per_token(m, 1) * math.ceil(seq / bs) * bs * 3 // 2
    need = m.n_params * m.weight_bytes + case["gpu"]["activation_bytes"] + kv_bytes
    case["gpu"]["memory_bytes"] = math.ceil(need / case["gpu"]["mem_util"])
    return case


def test_capacity_formulas():
    rng = random.Random(kit.seeded("capacity"))
    cases = [dict(c) for c in FIXED] + [_random_case(rng) for _ in range(300)]
    cases += [_one_sequence_case(rng) for _ in range(3)]
    for case in cases:
        case["capacity"] = rng.randrange(0, 10 ** 6)
        case["seq_len"] = rng.randrange(1, 9000)
        case["service"] = rng.uniform(0.001, 0.5)
        # rho = rate * service drawn around 1, both sides (and exactly 1 once in a while)
        case["rate_per_replica"] = rng.choice([rng.uniform(0.1, 1.5), 1.0]) / case["service"]
    answers = adapter.capacity_answers(cases)
    for i, (case, got) in enumerate(zip(cases, answers)):
        want = _expected(case)
        for key in want:
            assert _same(got[key], want[key]), (
                f"case {i} ({'fixed' if i < len(FIXED) else 'random'}), {key}: expected {want[key]!r}, got "
                f"{got[key]!r}\n  model={case['model']}\n  gpu={case['gpu']}\n  traffic={case['traffic']}\n  "
                f"tp={case['tp']} target={case['target']} block_size={case['block_size']} max_tp={case['max_tp']} "
                f"capacity={case['capacity']} seq_len={case['seq_len']} service={case['service']} "
                f"rate_per_replica={case['rate_per_replica']}\n(README.md, section \"Part 5\")")
    # The cases must reach every branch of plan(): some plans exist, some do not, several tp values win.
    plans = [_expected(c)["plan"] for c in cases]
    assert all(p is not None and p["max_seqs"] == 1 for p in plans[-3:]), "grader: one-sequence cases"
    assert any(p is None for p in plans) and len({p["tp"] for p in plans if p}) >= 2, "grader: weak case mix"


def test_kv_heads_per_gpu_round_up():
    """KV heads that do not divide by tp (12 heads on 8 GPUs, 40 on 16, 3 on 2):
    each GPU holds ceil(n_kv_heads / tp) of them, never the floor (README.md, "Part 5")."""
    rng = random.Random(kit.seeded("kv-heads-ceil"))
    cases = []
    for kvh, tp in ((12, 8), (40, 16), (3, 2), (6, 4), (5, 8)):
        case = _random_case(rng)
        case["model"]["n_kv_heads"], case["tp"] = kvh, tp
        case.update(capacity=rng.randrange(0, 10 ** 6), seq_len=rng.randrange(1, 9000), service=0.01,
                    rate_per_replica=1.0)
        cases.append(case)
    for case, got in zip(cases, adapter.capacity_answers(cases)):
        want = rc.kv_bytes_per_token(rc.ModelSpec(**case["model"]), case["tp"])
        assert _same(got["kv_bytes_per_token"], want), (
            f"kv_bytes_per_token with n_kv_heads={case['model']['n_kv_heads']} and tp={case['tp']}: expected {want} "
            f"(ceil(n_kv_heads / tp) heads per GPU), got {got['kv_bytes_per_token']!r} (README.md, section \"Part 5\")")


def _on_block_edge(rng: random.Random, tp: int, below: int) -> dict:
    """A case whose per-GPU KV budget is exactly `blocks` whole blocks minus `below` bytes: an error of one
    byte anywhere in the budget (the weight shard floored instead of rounded up, memory_bytes x mem_util
    rounded up) moves kv_capacity_tokens by a whole block. n_params x weight_bytes never divides by tp, and
    memory_bytes x mem_util has a fractional part of .5."""
    case = _random_case(rng)
    case.update(tp=tp, capacity=rng.randrange(0, 10 ** 6), seq_len=rng.randrange(1, 9000), service=0.01,
                rate_per_replica=1.0)
    model = case["model"]
    model["weight_bytes"] = 1
    model["n_params"] = model["n_params"] // tp * tp + rng.randrange(1, tp)      # a remainder: ceil != floor
    m = rc.ModelSpec(**model)
    bs = case["block_size"]
    budget = rng.randrange(10, 400) * bs * rc.kv_bytes_per_token(m, tp) - below
    usable = budget + math.ceil(m.n_params * m.weight_bytes / tp) + case["gpu"]["activation_bytes"]
    case["gpu"].update(memory_bytes=2 * usable + 1, mem_util=0.5)              # floor(x.5) = usable
    assert rc.kv_capacity_tokens(m, rc.GpuSpec(**case["gpu"]), tp, bs) * rc.kv_bytes_per_token(m, tp) \
        <= budget, "grader: block-edge case"
    return case


def test_capacity_at_exact_edges():
    """Exact boundaries the random draws never hit (README.md, "Part 5"): a KV budget one byte short of a
    whole block and exactly on one (the weight shard is ceil(n_params x weight_bytes / tp), the usable memory
    floor(memory_bytes x mem_util)); a budget of exactly 0; and a rate of 0, where replicas_needed is still
    max(1, ...) = 1."""
    rng = random.Random(kit.seeded("capacity-edges"))
    cases = [_on_block_edge(rng, tp, below) for tp in (2, 4, 8) for below in (1, 0)]
    empty = _on_block_edge(rng, 2, 0)                               # a budget of exactly 0 bytes: 0 tokens
    m = rc.ModelSpec(**empty["model"])
    usable = math.ceil(m.n_params * m.weight_bytes / 2) + empty["gpu"]["activation_bytes"]
    empty["gpu"].update(memory_bytes=2 * usable + 1)
    cases.append(empty)
    for case in [_random_case(rng) for _ in range(3)] + [dict(c) for c in FIXED]:
        case = dict(case, traffic=dict(case["traffic"], rate=0.0), capacity=1000, seq_len=100, service=0.01,
                    rate_per_replica=1.0, target=10.0)
        cases.append(case)                                          # no traffic: still one replica
    answers = adapter.capacity_answers(cases)
    for case, got in zip(cases, answers):
        want = _expected(case)
        for key in ("kv_capacity_tokens", "replicas_needed", "plan"):
            assert _same(got[key], want[key]), (
                f"{key}: expected {want[key]!r}, got {got[key]!r}\n  model={case['model']}\n  gpu={case['gpu']}\n"
                f"  traffic={case['traffic']}\n  tp={case['tp']} block_size={case['block_size']} "
                f"target={case['target']}\n  (the weight shard is ceil(n_params x weight_bytes / tp), the usable "
                "memory floor(memory_bytes x mem_util); replicas_needed is max(1, ...): at least one replica "
                "even with no traffic) (README.md, section \"Part 5\")")
    assert _expected(cases[-1])["replicas_needed"] == 1, "grader: the rate-0 case needs one replica"
