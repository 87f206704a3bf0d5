"""Parts 2 and 3 — how a warp's 32 addresses turn into memory traffic.

Global memory (part 2, README.md "Part 2: coalescing"): DRAM and L2 move data
in 32-byte *sectors*; L1 caches 128-byte *lines* (4 sectors). When the 32
threads of a warp load, the hardware merges ("coalesces") their addresses and
moves every sector any of them touches, once. Consecutive 4-byte loads touch
4 sectors (128 bytes, all useful); a stride of 32 floats touches 32 sectors
for the same 128 useful bytes: 8x the traffic.

Shared memory (part 3, README.md "Part 3: bank conflicts"): 32 banks, each 4
bytes wide; word w lives in bank w % 32. One request serves one word per bank:
threads that hit *different* words of the same bank are serialised (an n-way
conflict costs n passes); threads reading the *same* word get it broadcast.
8-byte accesses are served per half-warp (2 phases of 16 threads), 16-byte
ones per quarter-warp (4 phases of 8): conflicts only count inside a phase.
"""

from __future__ import annotations

SECTOR_BYTES = 32
LINE_BYTES = 128
BANKS = 32
BANK_WIDTH = 4
WARP = 32


def _check_access(address: int, element_bytes: int) -> None:
    if element_bytes not in (1, 2, 4, 8, 16):
        raise ValueError(f"element_bytes must be 1, 2, 4, 8 or 16, got {element_bytes}")
    if address < 0:
        raise ValueError(f"address {address} is negative")
    if address % element_bytes:
        raise ValueError(f"address {address} is not aligned to {element_bytes} bytes (a misaligned access faults)")


def coalescing(base_address: int, stride_elements: int, element_bytes: int,
               active: list[bool] | None = None) -> dict:
    """Traffic of one warp-wide load: thread t reads `element_bytes` bytes at
    base_address + t * stride_elements * element_bytes (stride may be 0 or
    negative). `active` (32 bools; None = all) masks threads off.

    Returns {"sectors", "lines", "bytes_used", "bytes_moved", "efficiency"}:
    distinct 32-byte sectors and 128-byte lines touched, distinct bytes the
    threads asked for, sectors * 32, and bytes_used / bytes_moved (0.0 when no
    thread is active). ValueError for a bad element size, a negative or
    misaligned address, or an `active` list that is not 32 long.
    """
    # BEGIN SOLUTION
    if active is None:
        active = [True] * WARP
    if len(active) != WARP:
        raise ValueError(f"active must have {WARP} entries, got {len(active)}")
    _check_access(0, element_bytes)  # the element size, even when no thread is active
    sectors: set[int] = set()
    lines: set[int] = set()
    used: set[int] = set()
    for t in range(WARP):
        if not active[t]:
            continue  # a masked-off thread accesses nothing: its address is never checked
        start = base_address + t * stride_elements * element_bytes
        _check_access(start, element_bytes)
        end = start + element_bytes - 1  # last byte, inclusive
        sectors.update(range(start // SECTOR_BYTES, end // SECTOR_BYTES + 1))
        lines.update(range(start // LINE_BYTES, end // LINE_BYTES + 1))
        used.update(range(start, end + 1))
    moved = len(sectors) * SECTOR_BYTES
    return {
        "sectors": len(sectors),
        "lines": len(lines),
        "bytes_used": len(used),
        "bytes_moved": moved,
        "efficiency": len(used) / moved if moved else 0.0,
    }
    # STARTER
    # raise NotImplementedError("coalescing: see README.md, section \"Part 2: coalescing\"")
    # END SOLUTION


def bank_conflict_degree(addresses: list[int | None], element_bytes: int = 4) -> int:
    """The n of an n-way bank conflict for one warp-wide shared-memory access.

    addresses[t] is thread t's byte address (None: thread inactive); at most
    32 entries (missing ones are inactive). The warp is served in phases of
    32 (element_bytes <= 4), 16 (8 bytes) or 8 (16 bytes) threads; in each
    phase, the degree is the largest number of DISTINCT 4-byte words that fall
    in one bank (the same word twice is a broadcast, not a conflict). Returns
    the largest degree over the phases; 0 if no thread is active.
    """
    # BEGIN SOLUTION
    if len(addresses) > WARP:
        raise ValueError(f"a warp has {WARP} threads, got {len(addresses)} addresses")
    phase = WARP * BANK_WIDTH // max(element_bytes, BANK_WIDTH)
    degree = 0
    for first in range(0, WARP, phase):
        words_in_bank: dict[int, set[int]] = {}
        for address in addresses[first:first + phase]:
            if address is None:
                continue
            _check_access(address, element_bytes)
            first_word = address // BANK_WIDTH
            last_word = (address + element_bytes - 1) // BANK_WIDTH
            for word in range(first_word, last_word + 1):
                words_in_bank.setdefault(word % BANKS, set()).add(word)
        if words_in_bank:
            degree = max(degree, max(len(words) for words in words_in_bank.values()))
    return degree
    # STARTER
    # raise NotImplementedError("bank_conflict_degree: see README.md, section \"Part 3: bank conflicts\"")
    # END SOLUTION


def column_read_addresses(rows: int, row_pitch_elements: int, column: int, element_bytes: int) -> list[int]:
    """Byte addresses when thread t reads element [t, column] of a row-major
    tile whose rows are `row_pitch_elements` apart (threads t >= rows are idle)."""
    return [(t * row_pitch_elements + column) * element_bytes for t in range(min(rows, WARP))]


def transpose_padding(tile_cols: int, element_bytes: int = 4, rows: int = WARP, max_padding: int = 64) -> int:
    """The smallest padding p >= 0 (in elements) for a shared-memory tile of
    `tile_cols` columns stored row-major with row pitch tile_cols + p, such that
    a warp reading any one column (thread t reads row t, `rows` rows) has no
    bank conflict at all (degree 1). ValueError if no p < max_padding works
    (shared memory is scarce: a caller may refuse to pad by more than that)."""
    # BEGIN SOLUTION
    for pad in range(max_padding):
        pitch = tile_cols + pad
        if all(bank_conflict_degree(column_read_addresses(rows, pitch, c, element_bytes), element_bytes) <= 1
               for c in range(min(tile_cols, BANKS))):
            return pad
    raise ValueError(f"no padding below {max_padding} elements removes the conflicts for {tile_cols} columns")
    # STARTER
    # raise NotImplementedError("transpose_padding: see README.md, section \"Part 3: bank conflicts\"")
    # END SOLUTION
