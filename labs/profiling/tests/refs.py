"""The grader's references and synthetic traces (grader process only: never learner-side)."""

from __future__ import annotations

import random

import pytest

from roadmap_cli import grading_kit as kit

Q = 0.25          # every synthetic time is a multiple of 0.25 µs: exact in binary floating point
BASE = 1_700_000_000_000.0   # a profiler-like absolute start (µs since some epoch)


def rng(name: str) -> random.Random:
    return random.Random(kit.seeded(f"profiling-{name}"))


def where(section: str) -> str:
    return f"(README.md, section \"{section}\")"


# ---------------------------------------------------------------- reference analysis


def ns(t: float) -> int:
    return round(t * 1000)


def events(trace, cat):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat]


def parents(evs):
    out = [None] * len(evs)
    threads: dict = {}
    for i, e in enumerate(evs):
        threads.setdefault((e["pid"], e["tid"]), []).append(i)
    for idxs in threads.values():
        idxs.sort(key=lambda i: (ns(evs[i]["ts"]), -ns(evs[i]["dur"])))
        stack = []
        for i in idxs:
            end = ns(evs[i]["ts"]) + ns(evs[i]["dur"])
            while stack and ns(evs[stack[-1]]["ts"]) + ns(evs[stack[-1]]["dur"]) < end:
                stack.pop()
            if stack:
                out[i] = stack[-1]
            stack.append(i)
    return out


def self_times(evs):
    child = [0] * len(evs)
    for i, p in enumerate(parents(evs)):
        if p is not None:
            child[p] += ns(evs[i]["dur"])
    return [(ns(e["dur"]) - c) / 1000 for e, c in zip(evs, child)]


def op_table(trace, cat):
    evs = events(trace, cat)
    rows: dict = {}
    for e, s in zip(evs, self_times(evs)):
        r = rows.setdefault(e["name"], [0, 0, 0])
        r[0] += 1
        r[1] += ns(e["dur"])
        r[2] += round(s * 1000)
    total_self = sum(r[2] for r in rows.values())
    table = [{"name": n, "calls": c, "total_us": t / 1000, "self_us": s / 1000, "mean_us": t / 1000 / c,
              "pct": 100.0 * s / total_self if total_self else 0.0} for n, (c, t, s) in rows.items()]
    table.sort(key=lambda r: (-r["self_us"], r["name"]))
    return table


def top_k(trace, cat, k, by):
    return [r["name"] for r in sorted(op_table(trace, cat), key=lambda r: (-r[by], r["name"]))[:k]]


def _runtime(trace):
    return {e["args"]["correlation"]: e for e in events(trace, "cuda_runtime") if "correlation" in e.get("args", {})}


def launches(trace):
    rt = _runtime(trace)
    out = []
    for k in events(trace, "kernel"):
        c = k.get("args", {}).get("correlation")
        if c in rt:
            out.append((ns(k["ts"]), c, {"kernel": k["name"], "launch": rt[c]["name"], "kernel_ts_us": k["ts"],
                                         "launch_ts_us": rt[c]["ts"], "delay_us": (ns(k["ts"]) - ns(rt[c]["ts"])) / 1000}))
    return [r for _, _, r in sorted(out, key=lambda t: (t[0], t[1]))]


def idle_gaps(trace, stream, min_gap_us=0.0):
    rt = _runtime(trace)
    cpu = events(trace, "cpu_op")
    ks = sorted((k for k in events(trace, "kernel") if k.get("args", {}).get("stream") == stream),
                key=lambda k: ns(k["ts"]))
    out = []
    for a, b in zip(ks, ks[1:]):
        s, e = ns(a["ts"]) + ns(a["dur"]), ns(b["ts"])
        if e - s > 0 and e - s >= ns(min_gap_us):
            out.append({"start_us": s / 1000, "end_us": e / 1000, "dur_us": (e - s) / 1000, "after": a["name"],
                        "before": b["name"], "cause": cause(cpu, rt.get(b.get("args", {}).get("correlation")), s, e)})
    return out


def cause(cpu, launch, s, e):
    if launch is None:
        return None
    mine = [x for x in cpu if (x["pid"], x["tid"]) == (launch["pid"], launch["tid"])]
    best = None
    for x in sorted((x for x, p in zip(mine, parents(mine)) if p is None), key=lambda x: ns(x["ts"])):
        ov = min(ns(x["ts"]) + ns(x["dur"]), e) - max(ns(x["ts"]), s)
        if ov > 0 and (best is None or ov > best[0]):
            best = (ov, x["name"])
    return best[1] if best else None


def roofline(flops, nbytes, peak, bw):
    ai = flops / nbytes
    return {"ai": ai, "ridge": peak / bw, "attainable": min(peak, ai * bw),
            "bound": "memory" if ai < peak / bw else "compute"}


def kernel_roofline(trace, gpu):
    rows: dict = {}
    for k in events(trace, "kernel"):
        a = k.get("args", {})
        if "flops" in a and "bytes" in a:
            r = rows.setdefault(k["name"], [0, 0, 0])
            r[0] += a["flops"]
            r[1] += a["bytes"]
            r[2] += ns(k["dur"])
    out = []
    for name, (f, b, t) in rows.items():
        p = roofline(f, b, gpu["peak_flops"], gpu["mem_bw"])
        ach = f / (t * 1e-9)
        out.append({"name": name, "flops": f, "bytes": b, "time_us": t / 1000, "achieved": ach, "ai": p["ai"],
                    "attainable": p["attainable"], "bound": p["bound"], "efficiency": ach / p["attainable"]})
    out.sort(key=lambda r: (-r["time_us"], r["name"]))
    return out


SYNC_OPS, SYNC_RUNTIME = ("aten::_local_scalar_dense",), ("cudaStreamSynchronize", "cudaDeviceSynchronize")
THRESHOLDS = {"host-sync": 2, "noncontiguous-copy": 2, "small-matmul-loop": 8}
SMALL_ROWS = 8


def bottleneck_counts(trace) -> dict:
    cpu, rt = events(trace, "cpu_op"), events(trace, "cuda_runtime")
    par = parents(cpu)
    copying = set()
    for i, e in enumerate(cpu):
        if e["name"] == "aten::copy_":
            p = par[i]
            while p is not None and cpu[p]["name"] != "aten::contiguous":
                p = par[p]
            if p is not None:
                copying.add(p)
    small = sum(1 for e in cpu if e["name"] == "aten::mm" and (d := e.get("args", {}).get("Input Dims"))
                and len(d[0]) == 2 and d[0][0] <= SMALL_ROWS)
    return {"host-sync": sum(e["name"] in SYNC_OPS for e in cpu) + sum(e["name"] in SYNC_RUNTIME for e in rt),
            "noncontiguous-copy": len(copying), "small-matmul-loop": small}


def find_bottlenecks(trace) -> list[str]:
    return sorted(k for k, n in bottleneck_counts(trace).items() if n >= THRESHOLDS[k])


def without_trailing_syncs(trace) -> dict:
    """The trace less the runtime syncs that start after its last kernel launch. Those are the
    harness's own: the explicit torch.cuda.synchronize() that ends the profiled call and the one the
    profiler makes on exit. They wait for work already queued and stall nothing, yet two of them equal
    the host-sync threshold, so a fixed model would be flagged. Syncs between launches stay."""
    runtime = events(trace, "cuda_runtime")
    launches = [ns(e["ts"]) for e in runtime if "Launch" in e["name"]]
    if not launches:
        return trace
    last = max(launches)
    drop = {id(e) for e in runtime if e["name"] in SYNC_RUNTIME and ns(e["ts"]) > last}
    return {**trace, "traceEvents": [e for e in trace["traceEvents"] if id(e) not in drop]}


# ---------------------------------------------------------------- synthetic traces


class Builder:
    """Writes a Chrome trace the way torch.profiler's export does (complete events, µs)."""

    def __init__(self, r: random.Random, pid: int = 4242):
        self.r, self.pid, self.ev, self.corr = r, pid, [], 1000 + r.randrange(1000)
        self.ev += [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": BASE, "args": {"name": "python"}},
                    {"ph": "M", "name": "thread_name", "pid": pid, "tid": pid, "ts": BASE, "args": {"name": "main"}}]

    def q(self, lo: float, hi: float) -> float:
        """A random duration, a multiple of Q in [lo, hi]."""
        return self.r.randint(int(lo / Q), int(hi / Q)) * Q

    def x(self, cat, name, ts, dur, tid=None, pid=None, **args) -> dict:
        e = {"ph": "X", "cat": cat, "name": name, "pid": self.pid if pid is None else pid,
             "tid": self.pid if tid is None else tid, "ts": BASE + ts, "dur": dur, "args": args}
        self.ev.append(e)
        return e

    def trace(self) -> dict:
        evs = list(self.ev)
        self.r.shuffle(evs)                                   # consumers must not rely on file order
        return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": evs}


CPU_NAMES = ["aten::linear", "aten::addmm", "aten::mm", "aten::relu", "aten::clamp_min", "aten::add",
             "aten::empty", "aten::copy_", "aten::softmax", "aten::layer_norm"]


def cpu_tree(b: Builder, t0: float, depth: int, tid: int, cat: str = "cpu_op") -> float:
    """A random operator with nested children starting at t0; returns its end. Children may start
    exactly at the parent's start or end exactly at its end (the edge the nesting rule settles)."""
    name = b.r.choice(CPU_NAMES)
    t = t0 + (0 if b.r.random() < 0.3 else b.q(0.25, 3))
    kids = []
    for _ in range(b.r.randint(0, 3) if depth < 3 else 0):
        end = cpu_tree(b, t, depth + 1, tid, cat)
        kids.append(end)
        t = end + (0 if b.r.random() < 0.3 else b.q(0.25, 4))
    end = t + (b.q(0.25, 6) if not kids or b.r.random() < 0.7 else 0)
    b.x(cat, name, t0, end - t0, tid=tid)
    return end


def cpu_trace(r: random.Random) -> dict:
    """Nested cpu_ops on two threads, noise of other categories and phases, a planted exact tie."""
    b = Builder(r)
    for tid in (b.pid, b.pid + 1):
        t = 0.0
        for _ in range(r.randint(5, 8)):
            t = cpu_tree(b, t, 0, tid) + b.q(0, 5)
    # two names with the same self time in total, on a thread of their own: the tie goes to the
    # name that sorts first
    t += 10
    d = b.q(3, 9)
    b.x("cpu_op", "aten::zeta_tie", t, d, tid=b.pid + 2)
    b.x("cpu_op", "aten::alpha_tie", t + d + 1, d, tid=b.pid + 2)
    b.x("cpu_op", "aten::alpha_tie", t + 2 * d + 2, 0.0, tid=b.pid + 2)   # a zero-length call still counts
    # noise the table must ignore: an annotation around everything, instants, flows, metadata
    b.x("user_annotation", "ProfilerStep#1", -1.0, t + 3 * d + 10)
    b.x("python_function", "forward", 0.0, t)
    b.ev.append({"ph": "i", "cat": "cpu_op", "name": "aten::instant", "pid": b.pid, "tid": b.pid, "ts": BASE + 1, "s": "t"})
    b.ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": b.pid, "tid": b.pid, "ts": BASE + 2})
    return b.trace()


KERNELS = [("volta_sgemm_128x64_nn", 2.0, "aten::mm"), ("elementwise_kernel<relu>", 0.25, "aten::relu"),
           ("reduce_kernel<sum>", 0.3, "aten::sum"), ("vectorized_copy_kernel", 0.125, "aten::copy_"),
           ("softmax_warp_forward", 0.6, "aten::softmax")]


def gpu_trace(r: random.Random, stream: int = 7) -> dict:
    """A CPU thread launching kernels on two streams; syncs and CPU-only work leave planted gaps.

    Simulated: each launch op (aten::X containing a cudaLaunchKernel) queues a kernel, which starts
    once the stream is free and the launch latency has passed; an aten::item (with
    aten::_local_scalar_dense and cudaStreamSynchronize inside) blocks the CPU until the stream drains;
    a long CPU-only op (aten::cat, a Python loop) launches nothing, so the GPU runs dry."""
    b = Builder(r)
    dev = 0
    other = stream + 6
    free = {stream: 0.0, other: 0.0}
    t = 0.0
    for step in range(r.randint(14, 20)):
        kind = r.choices(["launch", "sync", "cpu"], [6, 1.5, 1.5])[0]
        if step < 2:
            kind = "launch"
        if kind == "launch":
            name, ai, op_name = r.choice(KERNELS)
            s = other if r.random() < 0.2 else stream
            op_dur = b.q(6, 12)
            op = b.x("cpu_op", op_name, t, op_dur)
            lt = t + b.q(0.5, 1.5)
            b.corr += 1
            b.x("cuda_runtime", "cudaLaunchKernel", lt, b.q(2, op_dur - 2.5), correlation=b.corr)
            kstart = max(free[s], lt + b.q(3, 8))
            kdur = b.q(2, 30)
            nbytes = r.randint(1, 64) * 4096
            flops = int(nbytes * ai * r.choice([0.5, 1, 2, 40, 400]))
            args = {"correlation": b.corr, "stream": s, "device": dev}
            if r.random() < 0.8:
                args.update(flops=flops, bytes=nbytes)
            b.x("kernel", name, kstart, kdur, tid=s, pid=dev, **args)
            b.ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": b.corr, "pid": b.pid, "tid": b.pid, "ts": BASE + lt})
            b.ev.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": b.corr, "pid": dev, "tid": s, "ts": BASE + kstart, "bp": "e"})
            free[s] = kstart + kdur
            t = op["ts"] - BASE + op_dur + b.q(0.25, 2)
        elif kind == "sync":
            wait_until = max(free[stream], t + 3)
            item = b.x("cpu_op", "aten::item", t, 0.0)
            inner = b.x("cpu_op", "aten::_local_scalar_dense", t + 0.5, 0.0)
            b.x("cuda_runtime", "cudaStreamSynchronize", t + 1, wait_until - t)
            end = t + 1 + (wait_until - t) + b.q(0.5, 30)   # the copy to the host and Python inside .item()
            inner["dur"] = end - 0.25 - (t + 0.5)
            item["dur"] = end - t
            t = end + b.q(1, 20)                               # Python between the sync and the next launch
        else:
            d = b.q(20, 80)
            b.x("cpu_op", r.choice(["aten::cat", "aten::index", "aten::nonzero"]), t, d)
            t += d + b.q(0.25, 2)
    # a Triton-style launch: cuLaunchKernel straight from Python, inside no cpu_op; the only cpu_op
    # near the gap ends exactly where the gap starts (it touches it, overlap 0): the cause is None
    t = max(t, max(free.values())) + 40
    touch_end = t + 10
    b.x("cpu_op", "aten::empty", t, 10.0)
    b.corr += 1
    b.x("cuda_runtime", "cuLaunchKernel", touch_end + 3, 4.0, correlation=b.corr)
    # (flops without bytes: no roofline row for it)
    b.x("kernel", "triton_poi_fused_add", t, 10.0, tid=stream, pid=dev, correlation=0, stream=stream, flops=4096)
    b.x("kernel", "triton_poi_fused_mul", touch_end + 12, 6.0, tid=stream, pid=dev, correlation=b.corr,
        stream=stream)
    # a gap of one nanosecond is still a gap (longer than 0)
    b.x("kernel", "triton_poi_fused_sub", touch_end + 18.001, 2.0, tid=stream, pid=dev, correlation=0, stream=stream,
        bytes=8192)
    # a gap that three top-level ops overlap, the first one least: the cause is the largest overlap
    g0 = touch_end + 20.001 + 5                               # the gap's start
    b.x("kernel", "volta_sgemm_128x64_nn", g0 - 4, 4.0, tid=stream, pid=dev, correlation=0, stream=stream)
    b.x("cpu_op", "aten::zeros", g0 - 3, 5.0)                 # overlaps the gap by 2 µs
    b.x("cpu_op", "aten::nonzero", g0 + 2.5, 37.5)            # by 37.5 µs
    b.x("cpu_op", "aten::mm", g0 + 40.5, 9.5)                 # by 9.5 µs, and launches the next kernel
    b.corr += 1
    b.x("cuda_runtime", "cudaLaunchKernel", g0 + 41, 4.0, correlation=b.corr)
    b.x("kernel", "volta_sgemm_128x64_nn", g0 + 52, 8.0, tid=stream, pid=dev, correlation=b.corr, stream=stream)
    free[stream] = g0 + 60
    # a kernel whose launch fell outside the profiled window: no cuda_runtime with its correlation
    b.x("kernel", "orphan_kernel", max(free.values()) + 5, 3.0, tid=stream, pid=dev, correlation=1, stream=stream)
    return b.trace()


def bottleneck_trace(r: random.Random, planted: set, cuda: bool) -> dict:
    """cpu_ops (and cuda_runtime calls when `cuda`) in which each planted bottleneck shows exactly at its
    threshold, and each absent one at one below it (near misses), among unrelated ops (small aten::addmm ones too: not aten::mm)."""
    b = Builder(r)
    t = [0.0]

    def op(name, dur, tid=None, **args):
        e = b.x("cpu_op", name, t[0], dur, tid=tid, **args)
        return e

    def advance(d):
        t[0] += d + b.q(0.25, 2)

    items = []
    th = THRESHOLDS
    # Planted: exactly at the threshold (so an off-by-one in a count or a comparison shows);
    # absent: one below it (a near miss). A CUDA trace's 2 syncs are one .item() and one
    # cudaStreamSynchronize: both must count.
    n_sync = th["host-sync"] - (0 if "host-sync" in planted else 1)
    n_copy = th["noncontiguous-copy"] - (0 if "noncontiguous-copy" in planted else 1)
    n_mm = th["small-matmul-loop"] - (0 if "small-matmul-loop" in planted else 1)
    for i in range(n_sync):
        items.append(("sync", i))
    for i in range(n_copy):
        items.append(("copy", i))
    for i in range(n_mm):
        items.append(("mm", i))
    items += [("big-mm", i) for i in range(r.randint(8, 12))] + [("free-contig", i) for i in range(3)]
    items += [("bare-copy", i) for i in range(3)] + [("matmul-small", i) for i in range(3)]
    items += [("addmm-small", i) for i in range(3)]
    r.shuffle(items)
    for kind, i in items:
        if kind == "sync":
            if cuda and i % 2 == 1:
                b.x("cuda_runtime", "cudaStreamSynchronize", t[0], 4.0)    # a sync without .item()
                advance(4.0)
                continue
            item = op("aten::item", 6.0)
            b.x("cpu_op", "aten::_local_scalar_dense", t[0] + 1, 4.0)
            advance(item["dur"])
        elif kind == "copy":
            d = 8.0
            op("aten::contiguous", d)
            b.x("cpu_op", "aten::clone", t[0] + 0.5, d - 1)
            b.x("cpu_op", "aten::empty_like", t[0] + 1, 1.0)
            b.x("cpu_op", "aten::copy_", t[0] + 2.5, d - 4)         # two levels below the contiguous
            advance(d)
        elif kind == "addmm-small":
            # addmm with a 2-D bias (a first input of at most 8 rows): its name holds "mm" but it is not aten::mm
            rows, k, n = r.randint(1, SMALL_ROWS), r.randint(4, 64), r.randint(4, 64)
            name = "aten::_addmm_activation" if i == 2 else "aten::addmm"
            op(name, 5.0, **{"Input Dims": [[rows, n], [rows, k], [k, n]]})
            advance(5.0)
        elif kind in ("mm", "big-mm", "matmul-small"):
            rows = r.randint(1, SMALL_ROWS) if kind != "big-mm" else r.randint(SMALL_ROWS + 1, 64)
            if kind == "mm" and i == 0:
                rows = SMALL_ROWS                                     # the edge: exactly 8 rows is small
            if kind == "big-mm" and i == 0:
                rows = SMALL_ROWS + 1
            k, n = r.randint(4, 64), r.randint(4, 64)
            if kind == "matmul-small":
                # a small aten::matmul that dispatches to aten::bmm: not an aten::mm
                op("aten::matmul", 5.0, **{"Input Dims": [[2, rows, k], [2, k, n]]})
                b.x("cpu_op", "aten::bmm", t[0] + 0.5, 4.0, **{"Input Dims": [[2, rows, k], [2, k, n]]})
            else:
                op("aten::matmul", 5.0, **{"Input Dims": [[rows, k], [k, n]]})
                b.x("cpu_op", "aten::mm", t[0] + 0.5, 4.0, **{"Input Dims": [[rows, k], [k, n]]})
            advance(5.0)
        elif kind == "free-contig":
            op("aten::contiguous", 1.0)                               # already contiguous: no copy inside
            advance(1.0)
        else:
            op("aten::copy_", 3.0)                                    # a copy outside any contiguous
            advance(3.0)
    return b.trace()


# ---------------------------------------------------------------- comparisons


def close(a: float, b: float, rel: float = 1e-9, abs_: float = 1e-6) -> bool:
    return abs(a - b) <= max(abs_, rel * abs(b))


def compare_rows(got, want, keys_exact, keys_float, what, section):
    assert isinstance(got, list), f"{what}: returned {type(got).__name__}, expected a list of dicts {where(section)}"
    got_names = [g.get("name", g.get("kernel")) if isinstance(g, dict) else g for g in got]
    want_names = [w.get("name", w.get("kernel")) for w in want]
    assert len(got) == len(want), (f"{what}: {len(got)} rows {got_names[:12]}, expected {len(want)} "
                                   f"{want_names[:12]} {where(section)}")
    for i, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, dict), f"{what}: row {i} is {type(g).__name__}, expected a dict {where(section)}"
        for k in keys_exact:
            assert k in g, f"{what}: row {i} has no key {k!r} (keys {sorted(g)}) {where(section)}"
            assert g[k] == w[k], f"{what}: row {i} ({want_names[i]}) {k} = {g[k]!r}, expected {w[k]!r} {where(section)}"
        for k in keys_float:
            assert k in g, f"{what}: row {i} has no key {k!r} (keys {sorted(g)}) {where(section)}"
            assert isinstance(g[k], (int, float)) and close(float(g[k]), w[k]), (
                f"{what}: row {i} ({want_names[i]}) {k} = {g[k]!r}, expected {w[k]!r} {where(section)}")


def fail(msg: str, section: str):
    pytest.fail(f"{msg} {where(section)}")


# ---------------------------------------------------------------- part 4: the toy engine's ids


def toy_ids(prompt: str, n: int, vocab: int = 97) -> tuple[list[int], list[int]]:
    """request_path.ToyEngine's prompt ids and its n generated ids (the given code, worked out here)."""
    ids = [ord(c) % vocab for c in prompt]
    state, out = list(ids), []
    for _ in range(n):
        nxt = (sum(state) * 31 + len(state)) % vocab
        state.append(nxt)
        out.append(nxt)
    return ids, out


# ---------------------------------------------------------------- planted edges the red team found


def _file_order(trace: dict, first: dict, then: dict) -> None:
    """Put `first` before `then` in the (shuffled) event list: a tie that a stable sort would leave in
    file order must meet the order that goes wrong."""
    evs = trace["traceEvents"]
    i, j = next(k for k, e in enumerate(evs) if e is first), next(k for k, e in enumerate(evs) if e is then)
    if i > j:
        evs[i], evs[j] = evs[j], evs[i]


def off_grid_trace(r: random.Random) -> dict:
    """Nested cpu_ops whose times are whole nanoseconds off the 0.25 µs grid (0.1, 0.013 ...), as a real
    profiler writes them: a child ending exactly at its parent's end, whose float ts + dur comes out a
    hair past the parent's, planted until there are at least 4 such pairs."""
    b = Builder(r)
    t_ns, planted = 0, 0
    while planted < 4:
        p0 = t_ns + r.randint(1, 5000)
        c0 = p0 + r.randint(1, 3000)                       # the child starts inside
        end = c0 + r.randint(1, 9000)                      # and ends exactly where the parent ends
        parent = b.x("cpu_op", r.choice(CPU_NAMES), p0 / 1000, (end - p0) / 1000)
        child = b.x("cpu_op", r.choice(CPU_NAMES), c0 / 1000, (end - c0) / 1000)
        if child["ts"] + child["dur"] > parent["ts"] + parent["dur"]:
            planted += 1
        t_ns = end + r.randint(1, 4000)
    return b.trace()


def tied_launch_trace(r: random.Random, stream: int = 7) -> dict:
    """Kernels on two streams starting at the same instant, written to the file with the higher
    correlation id first: launches() orders ties by correlation id, not by file order."""
    b = Builder(r)
    t = 0.0
    pairs = []
    for _ in range(r.randint(3, 5)):
        ks = []
        for s in (stream, stream + 6):
            op_dur = b.q(6, 12)
            b.x("cpu_op", r.choice(KERNELS)[2], t, op_dur)
            b.corr += 1
            b.x("cuda_runtime", "cudaLaunchKernel", t + 1, 2.0, correlation=b.corr)
            t += op_dur + b.q(0.25, 2)
            ks.append((s, b.corr))
        start = t + b.q(3, 8)
        evs = [b.x("kernel", r.choice(KERNELS)[0], start, b.q(2, 30), tid=s, pid=0, correlation=c, stream=s,
                   device=0) for s, c in ks]
        pairs.append(evs)
        t = start + 40
    trace = b.trace()
    for low, high in pairs:
        _file_order(trace, high, low)
    return trace


CAUSE_KINDS = ("tie", "other-thread", "nested")


def cause_trace(r: random.Random, kind: str, stream: int = 7) -> dict:
    """Gaps on `stream` whose cause only the handout's full rule finds. `kind`:
    "tie": two top-level ops of the launching thread overlap the gap equally (the earlier one is the cause);
    "other-thread": another thread's op overlaps the gap more than any of the launching thread's;
    "nested": a top-level op and its child start together and both cover the gap (the child comes first in
    the file): only the top-level one may be the cause."""
    b = Builder(r)
    main, other = b.pid, b.pid + 1
    t = 0.0
    kernels = [b.x("kernel", r.choice(KERNELS)[0], t, b.q(2, 10), tid=stream, pid=0, correlation=0, stream=stream)]
    free = kernels[0]["ts"] - BASE + kernels[0]["dur"]
    pairs = []
    for _ in range(r.randint(3, 5)):
        g0, glen = free, b.q(20, 60)                       # the gap [g0, g0 + glen)
        g1 = g0 + glen
        if kind == "tie":
            x = b.q(1, glen / 2 - 1)
            s = g0 - b.q(1, 5)
            b.x("cpu_op", r.choice(CPU_NAMES), s, g0 + x - s)      # overlaps [g0, g0 + x)
            b.x("cpu_op", r.choice(CPU_NAMES), g1 - x, x + b.q(1, 5))   # overlaps [g1 - x, g1)
        elif kind == "other-thread":
            small = b.q(1, glen / 3)
            b.x("cpu_op", r.choice(CPU_NAMES), g0 + b.q(0.25, glen / 3), small)
            b.x("cpu_op", r.choice(CPU_NAMES), g0 - b.q(1, 5), glen + b.q(1, 10), tid=other)
        else:
            start = g0 - b.q(1, 5)
            cover = g1 - start + b.q(1, 5)
            parent = b.x("cpu_op", r.choice(CPU_NAMES), start, cover)
            child = b.x("cpu_op", r.choice(CPU_NAMES), start, cover - b.q(0.25, 1))
            pairs.append((child, parent))
        b.corr += 1
        b.x("cuda_runtime", "cudaLaunchKernel", g1 - b.q(3, 8), 2.0, tid=main, correlation=b.corr)
        # kernels of at least 12 µs: the ops around one gap never reach the next gap's
        k = b.x("kernel", r.choice(KERNELS)[0], g1, b.q(12, 20), tid=stream, pid=0, correlation=b.corr, stream=stream)
        kernels.append(k)
        free = g1 + k["dur"]                               # the next gap starts at this kernel's end
    trace = b.trace()
    for child, parent in pairs:
        _file_order(trace, child, parent)
    return trace


def off_grid_gap_trace(r: random.Random, stream: int = 7) -> tuple[dict, float]:
    """Kernels on `stream` at whole nanoseconds off the 0.25 µs grid, and the `min_gap_us` to ask for.

    Planted until each shows at least twice, for both ways of writing the float difference
    (`nts - (pts + pdur)` and `nts - pts - pdur`): kernels that touch in integer ns (next start == end)
    whose float difference comes out a hair above 0 (no gap: it is not longer than 0), and gaps exactly
    `min_gap_us` long in integer ns whose float difference comes out a hair below it (kept: at least
    min_gap_us). Between them, gaps of other lengths, each with one top-level cpu_op inside as its cause."""
    b = Builder(r)
    gap_ns = r.randint(1, 9) * 1000 + r.choice([1, 3, 7, 13, 101, 333])    # off the grid: 1.001 µs, 4.333 µs ...
    min_gap_us = gap_ns / 1000
    touch, exact = [0, 0], [0, 0]
    t_ns = r.randint(1, 5000)
    prev = None

    def kernel(start_ns: int, dur_ns: int) -> dict:
        b.corr += 1
        b.x("cuda_runtime", "cudaLaunchKernel", (start_ns - r.randint(3000, 8000)) / 1000, 2.0, correlation=b.corr)
        return b.x("kernel", r.choice(KERNELS)[0], start_ns / 1000, dur_ns / 1000, tid=stream, pid=0,
                   correlation=b.corr, stream=stream)

    while min(touch + exact) < 2:
        dur_ns = r.randint(12_000, 30_000)
        kind = r.choice(["touch", "exact", "other"])
        if prev is None:
            kind = "other"
        gap = {"touch": 0, "exact": gap_ns, "other": gap_ns + r.randint(1000, 40_000)}[kind]
        start_ns = t_ns + gap
        if kind == "other" and prev is not None:
            b.x("cpu_op", r.choice(CPU_NAMES), (t_ns + gap // 4) / 1000, (gap // 2) / 1000)
        k = kernel(start_ns, dur_ns)
        if prev is not None and kind != "other":
            one = k["ts"] - (prev["ts"] + prev["dur"])
            two = k["ts"] - prev["ts"] - prev["dur"]
            if kind == "touch":
                touch[0] += one > 0
                touch[1] += two > 0
            else:
                exact[0] += one < min_gap_us
                exact[1] += two < min_gap_us
        prev = k
        t_ns = start_ns + dur_ns
    return b.trace(), min_gap_us
