"""Part 5: reading vLLM's C++ launchers. Every answer is a number (or tuple)
checked exactly against the grader's own reading of the same code."""

from __future__ import annotations

import random

import pytest

import adapter
import reference
from roadmap_cli import grading_kit as kit

SECTION = "Part 5: reading vLLM's C++"


def kind_mismatch(got, want) -> str | None:
    """What `got` IS, beyond its value, where it differs from `want`: 2048.0 == 2048 and True == 1 in
    Python, but a byte count is an int and use_v1 answers a bool (the handout: every number is a
    Python int). Tuples may come back as lists (the adapter keeps either); their items may not."""
    if isinstance(want, bool) or want is None or isinstance(want, int):
        return None if type(got) is type(want) else f"{got!r} is a {type(got).__name__}, expected a {type(want).__name__}"
    if isinstance(want, (tuple, list)) and isinstance(got, (tuple, list)):
        for g, w in zip(got, want):
            why = kind_mismatch(g, w)
            if why:
                return why
    return None


def expect_equal(call: str, got, want) -> None:
    if isinstance(want, dict):
        if not isinstance(got, dict):
            pytest.fail(f"{call} returned {got!r}, expected a dict (README.md, section \"{SECTION}\")", pytrace=False)
        for key, value in want.items():
            have = got.get(key, "<missing>")
            if have != value:
                pytest.fail(f"{call}: {key} = {have!r}, expected {value!r} (README.md, section \"{SECTION}\")",
                            pytrace=False)
            why = kind_mismatch(have, value)
            if why:
                pytest.fail(f"{call}: {key}: {why} (README.md, section \"{SECTION}\")", pytrace=False)
        return
    if got != want:
        pytest.fail(f"{call} = {got!r}, expected {want!r} (README.md, section \"{SECTION}\")", pytrace=False)
    why = kind_mismatch(got, want)
    if why:
        pytest.fail(f"{call}: {why} (README.md, section \"{SECTION}\")", pytrace=False)


# (version, num_seqs, num_heads, head_size, max_seq_len, block_size, num_threads)
LAUNCH_EDGES = [
    (1, 1, 32, 128, 1, 16, 128),       # one token: padded to one block
    (1, 8, 32, 128, 17, 16, 128),      # 17 tokens pad to 32
    (1, 2, 8, 256, 4, 8, 256),         # outputs (4 warps/2 * 256 * 4 = 2048 B) beat logits (8 * 4 = 32 B)
    (1, 3, 40, 80, 1000, 32, 128),     # logits win: 1024 * 4
    (2, 4, 32, 128, 512, 16, 128),     # exactly one partition
    (2, 4, 32, 128, 513, 16, 128),     # one token more: two partitions
    (2, 1, 64, 256, 32768, 16, 512),   # 64 partitions; 8 warps -> outputs 4 * 256 * 4 = 4096 B
    (2, 5, 12, 64, 8193, 32, 128),
]


@pytest.mark.parametrize("case", LAUNCH_EDGES, ids=lambda c: f"v{c[0]}-seq{c[4]}-bs{c[5]}-t{c[6]}")
def test_paged_attention_launch_edges(case):
    v, s, h, d, n, bs, t = case
    call = f"paged_attention_launch(version={v}, num_seqs={s}, num_heads={h}, head_size={d}, max_seq_len={n}, block_size={bs}, num_threads={t})"
    expect_equal(call, adapter.reading("paged_attention_launch", v, s, h, d, n, bs, num_threads=t),
                 reference.paged_attention_launch(v, s, h, d, n, bs, t))


def test_paged_attention_launch_random():
    r = random.Random(kit.seeded("launch"))
    for _ in range(60):
        v, s, h = r.choice([1, 2]), r.randint(1, 300), r.choice([1, 4, 8, 12, 32, 40, 64])
        d, bs, t = r.choice([64, 80, 96, 112, 128, 192, 256]), r.choice([8, 16, 32]), r.choice([64, 128, 256, 512])
        n = r.choice([r.randint(1, 20000), r.randint(1, 600), 512 * r.randint(1, 30), bs * r.randint(1, 100) + 1])
        call = f"paged_attention_launch({v}, {s}, {h}, {d}, {n}, {bs}, num_threads={t})"
        expect_equal(call, adapter.reading("paged_attention_launch", v, s, h, d, n, bs, num_threads=t),
                     reference.paged_attention_launch(v, s, h, d, n, bs, t))


@pytest.mark.parametrize("case", [(512, 1, 1), (513, 1, 1), (513, 16, 32), (513, 16, 33), (8192, 64, 64),
                                  (8193, 1000, 64), (100, 1, 1), (4096, 1, 512), (4096, 2, 257)],
                         ids=lambda c: f"len{c[0]}-s{c[1]}-h{c[2]}")
def test_use_v1(case):
    n, s, h = case
    expect_equal(f"use_v1(max_seq_len={n}, num_seqs={s}, num_heads={h})", adapter.reading("use_v1", n, s, h),
                 reference.use_v1(n, s, h))


def test_slot_mapping():
    r = random.Random(kit.seeded("slots"))
    cases = [([7, 2, 9], [0, 1, 15, 16, 17, 40, 47], 16), ([3], [-1, 0, -1, 2], 4), ([5, 0], [0, 7, 8, 15], 8)]
    for _ in range(20):
        bs = r.choice([1, 4, 16, 32])
        table = r.sample(range(500), r.randint(1, 12))
        positions = [r.choice([-1, r.randrange(len(table) * bs)]) for _ in range(r.randint(1, 30))]
        cases.append((table, positions, bs))
    for table, positions, bs in cases:
        expect_equal(f"slot_mapping({table}, {positions}, block_size={bs})",
                     list(adapter.reading("slot_mapping", table, positions, bs)),
                     reference.slot_mapping(table, positions, bs))


def test_cache_write_indices():
    r = random.Random(kit.seeded("cache-index"))
    cases = [(-1, 0, 0, 8, 64, 16, 8), (0, 0, 0, 8, 64, 16, 8), (17, 3, 9, 8, 64, 16, 8), (5, 1, 127, 2, 128, 16, 8)]
    for _ in range(40):
        x = r.choice([2, 4, 8, 16])
        d = x * r.randint(1, 16)
        h, bs = r.randint(1, 16), r.choice([8, 16, 32])
        cases.append((r.randrange(4096), r.randrange(h), r.randrange(d), h, d, bs, x))
    for slot, head, dim, h, d, bs, x in cases:
        expect_equal(f"cache_write_indices(slot={slot}, head={head}, dim={dim}, num_heads={h}, head_size={d}, "
                     f"block_size={bs}, x={x})",
                     tuple(adapter.reading("cache_write_indices", slot, head, dim, h, d, bs, x)),
                     reference.cache_write_indices(slot, head, dim, h, d, bs, x))


@pytest.mark.parametrize("case", [(1, 1, 64), (7, 8, 64), (300, 32, 128), (5, 4, 80), (2, 3, 170)],
                         ids=lambda c: f"t{c[0]}-h{c[1]}-d{c[2]}")
def test_reshape_and_cache_launch(case):
    expect_equal(f"reshape_and_cache_launch{case}", adapter.reading("reshape_and_cache_launch", *case),
                 reference.reshape_and_cache_launch(*case))
