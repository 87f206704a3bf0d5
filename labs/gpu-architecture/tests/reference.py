"""The grader's own models (never the learner's): written independently of the
reference solution, in a different style, so one typo cannot hide in both."""

from __future__ import annotations

import math

WARP = 32
KB = 1024

# name -> (max warps, max blocks, smem per SM, max smem per block, carve-outs KB)
SM_LIMITS = {
    "sm_80": (64, 32, 164 * KB, 163 * KB, (0, 8, 16, 32, 64, 100, 132, 164)),
    "sm_86": (48, 16, 100 * KB, 99 * KB, (0, 8, 16, 32, 64, 100)),
    "sm_89": (48, 24, 100 * KB, 99 * KB, (0, 8, 16, 32, 64, 100)),
    "sm_90": (64, 32, 228 * KB, 227 * KB, (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)),
}
LIMITERS = ("warps", "blocks", "registers", "shared memory")


def occupancy(arch: str, threads: int, regs: int, smem: int, carveout_kb=None) -> dict:
    max_warps, max_blocks, smem_sm, smem_block_max, carveouts = SM_LIMITS[arch]
    warps = math.ceil(threads / WARP)
    carve = smem_sm if carveout_kb is None else carveout_kb * KB
    regs_warp = math.ceil(regs * WARP / 256) * 256
    if regs_warp * warps > 65536:
        by_regs = 0
    else:
        by_regs = (16384 // regs_warp) * 4 // warps
    if smem > smem_block_max:
        by_smem = 0
    else:
        by_smem = carve // (math.ceil((smem + KB) / 128) * 128)
    limits = {"warps": max_warps // warps, "blocks": max_blocks, "registers": by_regs, "shared memory": by_smem}
    blocks = min(limits.values())
    return {"active_blocks": blocks, "active_warps": blocks * warps, "occupancy": blocks * warps / max_warps,
            "limiters": [k for k in LIMITERS if limits[k] == blocks]}


def best_block_size(arch, regs, smem_per_thread, candidates=(64, 128, 256, 512, 1024)):
    scored = [(occupancy(arch, t, regs, smem_per_thread * t), t) for t in candidates]
    fitting = [(r["occupancy"], -t) for r, t in scored if r["active_blocks"] > 0]
    if not fitting:
        return None
    return -max(fitting)[1]


def coalescing(base, stride, size, active=None):
    """Sectors/lines via interval arithmetic over the sorted accesses."""
    active = active or [True] * WARP
    starts = sorted({base + t * stride * size for t in range(WARP) if active[t]})
    if not starts:
        return {"sectors": 0, "lines": 0, "bytes_used": 0, "bytes_moved": 0, "efficiency": 0.0}
    intervals = []
    for s in starts:  # merge overlapping byte ranges [s, s + size)
        if intervals and s <= intervals[-1][1]:
            intervals[-1][1] = max(intervals[-1][1], s + size)
        else:
            intervals.append([s, s + size])
    used = sum(e - s for s, e in intervals)

    def units(width):
        seen = set()
        for s, e in intervals:
            seen.update(range(s // width, (e - 1) // width + 1))
        return len(seen)

    sectors = units(32)
    return {"sectors": sectors, "lines": units(128), "bytes_used": used, "bytes_moved": 32 * sectors,
            "efficiency": used / (32 * sectors)}


def bank_degree(addresses, size=4):
    per_phase = {1: 32, 2: 32, 4: 32, 8: 16, 16: 8}[size]
    worst = 0
    for p in range(0, WARP, per_phase):
        banks = {}
        for a in addresses[p:p + per_phase]:
            if a is None:
                continue
            for w in range(a // 4, (a + size + 3) // 4):
                banks.setdefault(w % 32, set()).add(w)
        worst = max([worst] + [len(v) for v in banks.values()])
    return worst


def transpose_padding(cols, size=4, rows=WARP, max_padding=64):
    for pad in range(max_padding):
        pitch = cols + pad
        ok = True
        for c in range(min(cols, 32)):
            addrs = [(t * pitch + c) * size for t in range(min(rows, WARP))]
            if bank_degree(addrs, size) > 1:
                ok = False
                break
        if ok:
            return pad
    return None


def simt(program, n_threads):
    out = []
    for w in range(math.ceil(n_threads / WARP)):
        base = w * WARP
        lanes = frozenset(l for l in range(WARP) if base + l < n_threads)
        acc = [0, 0]

        def run(body, on):
            for st in body:
                if st[0] == "op":
                    acc[0] += st[1]
                    acc[1] += st[1] * len(on)
                elif st[0] == "if":
                    acc[0] += 1
                    acc[1] += len(on)
                    yes = frozenset(l for l in on if st[1][base + l])
                    no = on - yes
                    if yes:
                        run(st[2], yes)
                    if no:
                        run(st[3], no)
                elif st[0] == "pred":
                    yes = frozenset(l for l in on if st[1][base + l])
                    run(st[2], yes)
                    run(st[3], on - yes)
                elif st[0] == "loop":
                    most = max((st[1][base + l] for l in on), default=0)
                    for i in range(most):
                        live = frozenset(l for l in on if st[1][base + l] > i)
                        acc[0] += 1
                        acc[1] += len(live)
                        run(st[2], live)

        run(program, lanes)
        out.append({"issued": acc[0], "active_lane_cycles": acc[1]})
    return out


def ridge(peak, bw):
    return peak * 1000.0 / bw


def attainable(i, peak, bw):
    return min(peak, i * bw / 1000.0)


def matmul_traffic(m, n, k, bm, bn, e):
    flops = 2 * m * n * k
    by = e * (math.ceil(n / bn) * m * k + math.ceil(m / bm) * k * n + m * n)
    return flops, by


def matmul_ceiling_tflops(m, n, k, e, peak, bw):
    """The fastest any m x k @ k x n matmul can run: the compute peak, or the bandwidth times the
    intensity of the bytes that MUST move (each input read once, the output written once). The
    tiled traffic model (matmul_traffic) assumes no cache reuse, which cuBLAS beats by far: it is
    the learner's model of a kernel, never a bound on a measured time (GRADING.md)."""
    return attainable(2 * m * n * k / (e * (m * k + k * n + m * n)), peak, bw)


def flash_traffic(b, h, n, d, bm, causal, e):
    nb = math.ceil(n / bm)
    rows = sum(min(n, (i + 1) * bm) for i in range(nb)) if causal else nb * n
    flops = 2 * n * (n + 1) * d if causal else 4 * n * n * d
    return b * h * flops, b * h * (e * (2 * n * d + 2 * rows * d) + 4 * n)


def paged_traffic(lens, nh, nkv, d, bs, e):
    flops = sum(4 * nh * L * d for L in lens)
    by = sum(e * (2 * L * nkv * d + 2 * nh * d) + 4 * (math.ceil(L / bs) + 1) for L in lens)
    return flops, by
