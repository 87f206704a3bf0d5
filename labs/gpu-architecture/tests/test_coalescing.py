"""Part 2: sectors and lines a warp touches, exactly, on the classic patterns,
the awkward ones (misaligned bases, negative and zero strides, masked lanes,
1- and 16-byte elements) and seeded random ones."""

from __future__ import annotations

import pytest

import adapter
import reference
from cases import expect_equal, rng

SECTION = "Part 2: coalescing"

PATTERNS = [
    (0, 1, 4, None),        # the ideal: 128 contiguous bytes, 4 sectors, 1 line
    (0, 2, 4, None),        # every other float: twice the sectors
    (0, 32, 4, None),       # one float per line: 32 sectors for 128 useful bytes
    (0, 1, 8, None),        # doubles: 256 bytes, 8 sectors, 2 lines
    (16, 1, 4, None),       # a base 16 bytes into a sector: 5 sectors, 2 lines
    (96, 1, 4, None),       # 96 + 128 crosses a line boundary
    (64, 0, 4, None),       # every thread the same float: 1 sector, 4 useful bytes
    (4096, -1, 4, None),    # a reversed walk is still coalesced
    (8192, -3, 2, None),    # negative odd stride of halves
    (0, 1, 16, None),       # 16-byte vector loads: 512 bytes
    (5, 1, 1, None),        # bytes, odd base
    (0, 7, 2, None),
    (0, 1, 4, [t % 2 == 0 for t in range(32)]),    # half the lanes off: same sectors
    (0, 1, 4, [t < 8 for t in range(32)]),         # only 8 lanes: one sector
    (0, 33, 4, [t >= 30 for t in range(32)]),
    (0, 1, 4, [False] * 32),                       # nobody loads
    # masked-off lanes access nothing: their addresses (below 0 here) are never checked
    (60, -4, 4, [t < 4 for t in range(32)]),
    (0, -1, 8, [t == 0 for t in range(32)]),
    (8, -1, 2, [t <= 4 for t in range(32)]),
]


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: f"base{p[0]}-stride{p[1]}-size{p[2]}"
                         + ("" if p[3] is None else f"-{sum(p[3])}lanes"))
def test_patterns(pattern):
    base, stride, size, active = pattern
    expected = reference.coalescing(base, stride, size, active)
    got = adapter.coalescing(base, stride, size, active)
    expect_equal(f"coalescing(base={base}, stride={stride}, element_bytes={size}"
                 f"{'' if active is None else f', {sum(active)} active lanes'})", got, expected, SECTION)


def test_random_patterns():
    r = rng("coalescing-random")
    for _ in range(300):
        size = r.choice([1, 2, 4, 8, 16])
        stride = r.choice([r.randint(-40, 40), r.choice([0, 1, -1, 2, 32, 33])])
        base = size * r.randint(0, 4096) + (size * 40 * 32 if stride < 0 else 0)
        active = None if r.random() < 0.6 else [r.random() < 0.7 for _ in range(32)]
        expected = reference.coalescing(base, stride, size, active)
        got = adapter.coalescing(base, stride, size, active)
        expect_equal(f"coalescing(base={base}, stride={stride}, element_bytes={size}, active={active})",
                     got, expected, SECTION)


@pytest.mark.parametrize("bad", [(2, 1, 4, None), (0, 1, 3, None), (0, 1, 4, [True] * 31), (8, -3, 4, None),
                                 (8, -3, 4, [t == 5 for t in range(32)]), (0, 1, 3, [False] * 32)],
                         ids=["misaligned", "size-3", "31-lanes", "negative-address", "negative-address-active-lane",
                              "size-3-no-active-lane"])
def test_invalid_accesses_raise(bad):
    with pytest.raises(ValueError):
        adapter.coalescing(*bad)
