"""Part 4 — SIMT: one instruction stream, 32 lanes, and what divergence costs.

A warp issues ONE instruction at a time for all its 32 threads (lanes). When
the threads of a warp disagree at a branch, the warp runs each side in turn
with the other lanes switched off: the cycles add up, the useful work does
not. README.md, section "Part 4: warps and divergence", defines the tiny
program format and the cost model used here:

    ("op", n)                        n instructions, issued with the current mask
    ("if", pred, then, else)         a real branch: 1 cycle for the branch itself, then
                                     each side is issued only if some active lane takes it
    ("pred", pred, then, else)       predication: no branch; both sides are always issued,
                                     each with its lanes masked (cheap for short bodies)
    ("loop", trips, body)            lane t runs body trips[t] times; the warp repeats the body
                                     while any active lane still has iterations left, each
                                     iteration costing 1 extra cycle (the back-edge branch)

`pred` and `trips` are indexed by the GLOBAL thread id (warp w, lane l is
thread 32*w + l). A body is a list of such statements.
"""

from __future__ import annotations

WARP = 32


def _run(body: list, mask: list[bool], first_thread: int, cost: dict) -> None:
    """Issue `body` for one warp whose active lanes are `mask`; add into `cost`."""
    raise NotImplementedError("_run: see README.md, section \"Part 4: warps and divergence\"")


def simt_cost(program: list, n_threads: int) -> list[dict]:
    """Per warp: {"issued": cycles the warp issued, "active_lane_cycles": sum over
    those cycles of the lanes doing useful work}. Threads >= n_threads (the tail
    of the last warp) are inactive from the start."""
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    warps = []
    for first in range(0, n_threads, WARP):
        mask = [first + lane < n_threads for lane in range(WARP)]
        cost = {"issued": 0, "active_lane_cycles": 0}
        _run(program, mask, first, cost)
        warps.append(cost)
    return warps


def simt_efficiency(program: list, n_threads: int) -> float:
    """Useful lane-cycles / (32 x issued cycles) over all warps: 1.0 means no
    lane ever idled; 1/32 means one lane did all the work."""
    raise NotImplementedError("simt_efficiency: see README.md, section \"Part 4: warps and divergence\"")
