"""Part 1 — occupancy: how many blocks of a kernel fit on one SM at once.

An SM keeps every resident warp's registers and every resident block's shared
memory on chip, so the number of blocks that can be resident together is the
smallest of four limits (README.md, section "Part 1: occupancy"):

    warps      max_warps_per_sm // warps_per_block
    blocks     max_blocks_per_sm
    registers  warps that fit in the register file, // warps_per_block
    shared     carve-out bytes // shared bytes one block occupies

Occupancy = resident warps / max_warps_per_sm. High occupancy hides latency
(the warp schedulers always find a warp that is ready), but it is a means,
not the goal: a kernel at 25% occupancy with good ILP can beat one at 100%.
"""

from __future__ import annotations

from gpu_specs import KB, SMSpec

LIMITERS = ("warps", "blocks", "registers", "shared memory")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(threads_per_block: int, registers_per_thread: int, shared_memory_per_block: int,
              sm: SMSpec, carveout_kb: int | None = None) -> dict:
    """Resident blocks and warps per SM for one kernel launch configuration.

    threads_per_block        1..sm.max_threads_per_block (else ValueError)
    registers_per_thread     1..sm.max_registers_per_thread (else ValueError)
    shared_memory_per_block  bytes the kernel asks for (static + dynamic), >= 0
    carveout_kb              the SM's shared-memory carve-out; None = the largest.
                             Must be one of sm.shared_memory_carveouts_kb (else ValueError).

    Returns {"active_blocks", "active_warps", "occupancy", "limiters"}: limiters
    lists, in LIMITERS order, every limit that equals the minimum. A block that
    can never fit (too many registers or too much shared memory for one block)
    gives 0 blocks, limited by that resource.
    """
    raise NotImplementedError("occupancy: see README.md, section \"Part 1: occupancy\"")


def best_block_size(registers_per_thread: int, shared_memory_per_thread: int, sm: SMSpec,
                    candidates: tuple[int, ...] = (64, 128, 256, 512, 1024)) -> int:
    """The block size among `candidates` with the highest occupancy for a kernel
    whose shared memory grows with the block (bytes per thread); ties go to the
    smaller block (more blocks, finer-grained scheduling at the tail of a grid).
    Candidates whose blocks cannot fit at all (0 blocks) are never chosen;
    if none fits, ValueError."""
    raise NotImplementedError("best_block_size: see README.md, section \"Part 1: occupancy\"")
