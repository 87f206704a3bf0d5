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
    # BEGIN SOLUTION
    if not 1 <= threads_per_block <= sm.max_threads_per_block:
        raise ValueError(f"threads_per_block must be within 1..{sm.max_threads_per_block}, got {threads_per_block}")
    if not 1 <= registers_per_thread <= sm.max_registers_per_thread:
        raise ValueError(f"registers_per_thread must be within 1..{sm.max_registers_per_thread}, "
                         f"got {registers_per_thread}")
    if shared_memory_per_block < 0:
        raise ValueError(f"shared_memory_per_block must be >= 0, got {shared_memory_per_block}")
    if carveout_kb is None:
        carveout_bytes = sm.shared_memory_per_sm
    elif carveout_kb in sm.shared_memory_carveouts_kb:
        carveout_bytes = carveout_kb * KB
    else:
        raise ValueError(f"carveout_kb must be one of {sm.shared_memory_carveouts_kb}, got {carveout_kb}")

    # A block occupies whole warps: 33 threads cost 2 warps.
    warps_per_block = -(-threads_per_block // sm.warp_size)

    by_warps = sm.max_warps_per_sm // warps_per_block
    by_blocks = sm.max_blocks_per_sm

    # Registers go to whole warps in units of 256, inside one of 4 sub-partitions.
    regs_per_warp = _round_up(registers_per_thread * sm.warp_size, sm.register_alloc_unit)
    if regs_per_warp * warps_per_block > sm.max_registers_per_block:
        by_registers = 0
    else:
        per_partition = sm.registers_per_sm // sm.register_sub_partitions
        warps_by_registers = (per_partition // regs_per_warp) * sm.register_sub_partitions
        by_registers = warps_by_registers // warps_per_block

    # Shared memory: the kernel's bytes plus the runtime's 1 KB, in 128-byte units.
    if shared_memory_per_block > sm.max_shared_memory_per_block:
        by_shared = 0
    else:
        per_block = _round_up(shared_memory_per_block + sm.reserved_shared_memory_per_block,
                              sm.shared_memory_alloc_unit)
        by_shared = carveout_bytes // per_block

    limits = dict(zip(LIMITERS, (by_warps, by_blocks, by_registers, by_shared)))
    blocks = min(limits.values())
    warps = blocks * warps_per_block
    return {
        "active_blocks": blocks,
        "active_warps": warps,
        "occupancy": warps / sm.max_warps_per_sm,
        "limiters": [name for name in LIMITERS if limits[name] == blocks],
    }
    # STARTER
    # raise NotImplementedError("occupancy: see README.md, section \"Part 1: occupancy\"")
    # END SOLUTION


def best_block_size(registers_per_thread: int, shared_memory_per_thread: int, sm: SMSpec,
                    candidates: tuple[int, ...] = (64, 128, 256, 512, 1024)) -> int:
    """The block size among `candidates` with the highest occupancy for a kernel
    whose shared memory grows with the block (bytes per thread); ties go to the
    smaller block (more blocks, finer-grained scheduling at the tail of a grid).
    Candidates whose blocks cannot fit at all (0 blocks) are never chosen;
    if none fits, ValueError."""
    # BEGIN SOLUTION
    best, best_occ = None, 0.0
    for threads in candidates:
        result = occupancy(threads, registers_per_thread, shared_memory_per_thread * threads, sm)
        if result["active_blocks"] == 0:
            continue
        # ties go to the smaller block, whatever order the candidates come in
        if best is None or result["occupancy"] > best_occ or (result["occupancy"] == best_occ and threads < best):
            best, best_occ = threads, result["occupancy"]
    if best is None:
        raise ValueError("no candidate block size fits on the SM")
    return best
    # STARTER
    # raise NotImplementedError("best_block_size: see README.md, section \"Part 1: occupancy\"")
    # END SOLUTION
