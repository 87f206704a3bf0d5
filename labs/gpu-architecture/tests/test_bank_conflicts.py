"""Part 3: the n-way bank conflict of a warp's shared-memory access, and the
padding that removes it from a transposed tile."""

from __future__ import annotations

import pytest

import adapter
import reference
from cases import expect_equal, rng

SECTION = "Part 3: bank conflicts"


def words(stride_words: int, n: int = 32, size: int = 4) -> list[int]:
    return [t * stride_words * 4 for t in range(n)]


ACCESSES = [
    ("consecutive floats", words(1), 4),
    ("stride 2 words", words(2), 4),
    ("stride 32 words", words(32), 4),
    ("stride 33 words (padded)", words(33), 4),
    ("stride 16 words", words(16), 4),
    ("all threads one word (broadcast)", [128] * 32, 4),
    ("two words, 16 threads each", [0 if t % 2 else 128 for t in range(32)], 4),
    ("halves, consecutive", [2 * t for t in range(32)], 2),
    ("halves, stride 64", [128 * t for t in range(32)], 2),
    ("bytes, same word", [t % 4 for t in range(32)], 1),
    ("doubles, consecutive (half-warps)", [8 * t for t in range(32)], 8),
    ("doubles, stride 16", [128 * t for t in range(32)], 8),
    ("float4, consecutive (quarter-warps)", [16 * t for t in range(32)], 16),
    ("float4, stride 8", [128 * t for t in range(32)], 16),
    ("inactive lanes", [None if t % 4 else 32 * 4 * t for t in range(32)], 4),
    ("only 8 threads", [256 * t for t in range(8)], 4),
    ("nobody", [None] * 32, 4),
    ("empty", [], 4),
]


@pytest.mark.parametrize("access", ACCESSES, ids=lambda a: a[0].replace(" ", "-"))
def test_known_patterns(access):
    name, addresses, size = access
    expect_equal(f"bank_conflict_degree({name}, element_bytes={size})",
                 adapter.bank_conflict_degree(addresses, size), reference.bank_degree(addresses, size), SECTION)


def _only(lanes: dict[int, int]) -> list:
    return [lanes.get(t) for t in range(32)]


# Wide accesses at the phase boundaries, with the answer worked out by hand
# (README.md: 8-byte accesses per half-warp, 16-byte per quarter-warp, each
# access touching ceil(e / 4) consecutive words).
WIDE = [
    ("8B, lanes 0 and 16, same bank", _only({0: 0, 16: 256}), 8, 1),      # two half-warps: no conflict
    ("8B, lanes 0 and 15, same bank", _only({0: 0, 15: 256}), 8, 2),      # one half-warp: 2-way
    ("8B, half-warp stride 16 words", [128 * t for t in range(32)], 8, 16),
    ("8B, consecutive", [8 * t for t in range(32)], 8, 1),
    ("8B, lanes 0 and 1, words 32 and 64", _only({0: 4 * 32, 1: 4 * 64}), 8, 2),
    ("16B, lanes 0 and 8, same bank", _only({0: 0, 8: 512}), 16, 1),      # two quarter-warps
    ("16B, lanes 0 and 7, same bank", _only({0: 0, 7: 512}), 16, 2),      # one quarter-warp
    ("16B, lanes 8-15 stride 8 words", _only({t: 128 * t for t in range(8, 16)}), 16, 8),
    ("16B, consecutive", [16 * t for t in range(32)], 16, 1),
    ("16B, one float4 broadcast", [64] * 32, 16, 1),
]


@pytest.mark.parametrize("access", WIDE, ids=lambda a: a[0].replace(" ", "-").replace(",", ""))
def test_wide_access_phases(access):
    name, addresses, size, want = access
    assert reference.bank_degree(addresses, size) == want, "the grader's own model disagrees with the hand count"
    expect_equal(f"bank_conflict_degree({name}, element_bytes={size})",
                 adapter.bank_conflict_degree(addresses, size), want, SECTION)


def test_default_element_size_is_4_bytes():
    addresses = [t * 8 for t in range(32)]  # with 4-byte elements: stride 2 words -> 2-way
    expect_equal("bank_conflict_degree(stride 2 words) with the default element_bytes",
                 adapter.bank_conflict_degree(addresses), reference.bank_degree(addresses, 4), SECTION)


def test_random_accesses():
    r = rng("banks-random")
    for _ in range(300):
        size = r.choice([1, 2, 4, 8, 16])
        n = r.choice([32, 32, r.randint(0, 32)])
        kind = r.random()
        if kind < 0.4:
            stride = r.randint(0, 70)
            base = size * r.randint(0, 64)
            addresses = [base + t * stride * size for t in range(n)]
        elif kind < 0.7:
            addresses = [size * r.randint(0, 512) for _ in range(n)]
        else:
            pool = [size * r.randint(0, 2048) for _ in range(3)]
            addresses = [r.choice(pool) for _ in range(n)]
        addresses = [None if r.random() < 0.15 else a for a in addresses]
        expect_equal(f"bank_conflict_degree({addresses}, element_bytes={size})",
                     adapter.bank_conflict_degree(addresses, size), reference.bank_degree(addresses, size), SECTION)


def test_misaligned_raises():
    with pytest.raises(ValueError):
        adapter.bank_conflict_degree([0, 2, 4], 4)


@pytest.mark.parametrize("tile", [(32, 4, None), (64, 4, None), (32, 2, None), (64, 2, None), (16, 8, None),
                                  (32, 8, 16), (48, 4, 24), (33, 4, None), (8, 1, None), (64, 16, 8)],
                         ids=lambda t: f"{t[0]}cols-{t[1]}B-{t[2]}rows")
def test_transpose_padding(tile):
    cols, size, rows = tile
    want = reference.transpose_padding(cols, size, 32 if rows is None else rows)
    expect_equal(f"transpose_padding(tile_cols={cols}, element_bytes={size}, rows={rows})",
                 adapter.transpose_padding(cols, size, rows), want, SECTION)


def test_transpose_padding_random():
    r = rng("padding-random")
    for _ in range(25):
        cols, size, rows = r.randint(1, 96), r.choice([1, 2, 4, 8]), r.choice([None, r.randint(2, 32)])
        want = reference.transpose_padding(cols, size, 32 if rows is None else rows)
        if want is None:
            with pytest.raises(ValueError):
                adapter.transpose_padding(cols, size, rows)
        else:
            expect_equal(f"transpose_padding(tile_cols={cols}, element_bytes={size}, rows={rows})",
                         adapter.transpose_padding(cols, size, rows), want, SECTION)
    expect_equal("transpose_padding(32) with the default element_bytes",
                 adapter.transpose_padding(32), reference.transpose_padding(32, 4), SECTION)


@pytest.mark.parametrize("tile", [(64, 2, None, 2), (32, 4, None, 1), (64, 2, None, 3), (48, 4, 24, 1), (7, 1, None, 1)],
                         ids=lambda t: f"{t[0]}cols-{t[1]}B-max{t[3]}")
def test_transpose_padding_with_a_limit(tile):
    """max_padding bounds the search: when the padding needed is not below it, ValueError."""
    cols, size, rows, limit = tile
    want = reference.transpose_padding(cols, size, 32 if rows is None else rows, limit)
    call = f"transpose_padding(tile_cols={cols}, element_bytes={size}, rows={rows}, max_padding={limit})"
    if want is None:
        with pytest.raises(ValueError):
            adapter.transpose_padding(cols, size, rows, limit)
    else:
        expect_equal(call, adapter.transpose_padding(cols, size, rows, limit), want, SECTION)
