"""Parts 1 and 2: read a profiler trace (Chrome trace format) and work out
where the time went.

A trace is the parsed JSON that `torch.profiler.profile.export_chrome_trace`
writes: a dict whose "traceEvents" list holds, among metadata, *complete
events* {"ph": "X", "cat": ..., "name": ..., "pid": ..., "tid": ..., "ts": µs,
"dur": µs, "args": {...}}. The categories used here:

  "cpu_op"        an ATen operator run on a CPU thread (aten::mm, aten::copy_ ...)
  "cuda_runtime"  a CUDA runtime call on a CPU thread (cudaLaunchKernel, cudaStreamSynchronize ...)
  "kernel"        a kernel on a GPU stream: pid = the device, tid = the stream,
                  args["stream"] = the stream, args["correlation"] = the id of
                  the cuda_runtime event that launched it

Every time in a trace is in microseconds (µs), possibly fractional (ns
resolution). Every function here returns µs too. Internally compare times as
integer nanoseconds, round(t * 1000): float sums such as ts + dur can differ
in the last bit from one way of writing them to another.
"""

from __future__ import annotations


def _ns(t: float) -> int:
    """µs (float) -> integer ns."""
    return round(t * 1000)


def events(trace: dict, cat: str) -> list[dict]:
    """The complete ("ph" == "X") events of category `cat`, in file order. Given."""
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat]


# ----------------------------------------------------------------- part 0: a real profile


def profile_cpu(fn, *args, steps: int = 2) -> dict:
    """Run fn(*args) `steps` times under torch.profiler on the CPU and return the Chrome trace as a dict."""
    # BEGIN SOLUTION
    import json
    import os
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    # record_shapes=True puts each operator's input shapes into args["Input Dims"]:
    # part 3 needs them to tell a (1, D) @ (D, D) matmul from a (B, D) @ (D, D) one.
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            fn(*args)
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    finally:
        os.remove(path)
    # STARTER
    # raise NotImplementedError("profile_cpu: see README.md, section \"Part 1: the kernel table\"")
    # END SOLUTION


# ----------------------------------------------------------------- part 1: the kernel table


# BEGIN SOLUTION
def parents(evs: list[dict]) -> list[int | None]:
    """The index of each event's direct parent in `evs` (None for a top-level event)."""
    out: list[int | None] = [None] * len(evs)
    by_thread: dict[tuple, list[int]] = {}
    for i, e in enumerate(evs):
        by_thread.setdefault((e["pid"], e["tid"]), []).append(i)
    for idxs in by_thread.values():
        # Sort by start, longest first on equal starts (then file order: sorted() is stable), so a
        # parent comes before the children it contains; a stack then holds the chain of open events.
        idxs.sort(key=lambda i: (_ns(evs[i]["ts"]), -_ns(evs[i]["dur"])))
        stack: list[int] = []
        for i in idxs:
            end = _ns(evs[i]["ts"]) + _ns(evs[i]["dur"])
            while stack and _ns(evs[stack[-1]]["ts"]) + _ns(evs[stack[-1]]["dur"]) < end:
                stack.pop()                       # the top ends before this one does: not its parent
            if stack:
                out[i] = stack[-1]                # the innermost open event is the direct parent
            stack.append(i)
    return out
# END SOLUTION


def self_times(evs: list[dict]) -> list[float]:
    """Self time (µs) of each event of `evs` (one category), in the same order.

    An event's children are the events of `evs` on the same (pid, tid) whose
    interval lies inside its own ([ts, ts + dur], ends included); its DIRECT
    children are those inside no other child. Self time = dur - the durations
    of the direct children.
    """
    # BEGIN SOLUTION
    parent = parents(evs)
    child_ns = [0] * len(evs)
    for i, p in enumerate(parent):
        if p is not None:
            child_ns[p] += _ns(evs[i]["dur"])
    return [(_ns(e["dur"]) - c) / 1000 for e, c in zip(evs, child_ns)]
    # STARTER
    # raise NotImplementedError("self_times: see README.md, section \"Part 1: the kernel table\"")
    # END SOLUTION


def op_table(trace: dict, cat: str = "kernel") -> list[dict]:
    """One row per distinct name among the events of `cat`:
    {"name", "calls", "total_us", "self_us", "mean_us", "pct"},
    sorted by self_us descending, ties by name ascending."""
    # BEGIN SOLUTION
    evs = events(trace, cat)
    selfs = self_times(evs)
    rows: dict[str, dict] = {}
    for e, s in zip(evs, selfs):
        r = rows.setdefault(e["name"], {"name": e["name"], "calls": 0, "total_ns": 0, "self_ns": 0})
        r["calls"] += 1
        r["total_ns"] += _ns(e["dur"])
        r["self_ns"] += round(s * 1000)
    all_self = sum(r["self_ns"] for r in rows.values())
    table = []
    for r in rows.values():
        table.append({
            "name": r["name"],
            "calls": r["calls"],
            "total_us": r["total_ns"] / 1000,
            "self_us": r["self_ns"] / 1000,
            "mean_us": r["total_ns"] / 1000 / r["calls"],
            # the share of all self time in this category: the percentages add up to 100
            "pct": 100.0 * r["self_ns"] / all_self if all_self else 0.0,
        })
    table.sort(key=lambda r: (-r["self_us"], r["name"]))
    return table
    # STARTER
    # raise NotImplementedError("op_table: see README.md, section \"Part 1: the kernel table\"")
    # END SOLUTION


def top_k(trace: dict, cat: str, k: int, by: str = "self_us") -> list[str]:
    """The names of the k rows of op_table(trace, cat) with the largest `by`
    ("self_us", "total_us", "calls" or "mean_us"), ties by name ascending."""
    # BEGIN SOLUTION
    if by not in ("self_us", "total_us", "calls", "mean_us"):
        raise ValueError(f"top_k: by must be self_us, total_us, calls or mean_us, not {by!r}")
    if k < 0:
        raise ValueError(f"top_k: k must be >= 0, not {k}")
    rows = sorted(op_table(trace, cat), key=lambda r: (-r[by], r["name"]))
    return [r["name"] for r in rows[:k]]
    # STARTER
    # raise NotImplementedError("top_k: see README.md, section \"Part 1: the kernel table\"")
    # END SOLUTION


# ----------------------------------------------------------------- part 2: gaps and the roofline


def launches(trace: dict) -> list[dict]:
    """Each kernel with the cuda_runtime event that launched it (same args["correlation"]):
    {"kernel", "launch", "kernel_ts_us", "launch_ts_us", "delay_us"}, sorted by kernel start
    (ties by correlation id). A kernel whose launch is not in the trace is left out."""
    # BEGIN SOLUTION
    runtime = {e["args"]["correlation"]: e for e in events(trace, "cuda_runtime") if "correlation" in e.get("args", {})}
    out = []
    for k in events(trace, "kernel"):
        corr = k.get("args", {}).get("correlation")
        if corr not in runtime:
            continue
        launch = runtime[corr]
        out.append({
            "kernel": k["name"],
            "launch": launch["name"],
            "kernel_ts_us": k["ts"],
            "launch_ts_us": launch["ts"],
            # how long the kernel waited in the stream's queue after the CPU asked for it
            "delay_us": (_ns(k["ts"]) - _ns(launch["ts"])) / 1000,
            "_corr": corr,
        })
    out.sort(key=lambda r: (_ns(r["kernel_ts_us"]), r["_corr"]))
    for r in out:
        del r["_corr"]
    return out
    # STARTER
    # raise NotImplementedError("launches: see README.md, section \"Part 2: GPU idle gaps and the roofline\"")
    # END SOLUTION


def idle_gaps(trace: dict, stream: int, min_gap_us: float = 0.0) -> list[dict]:
    """The idle gaps of one GPU stream: {"start_us", "end_us", "dur_us", "after", "before", "cause"}."""
    # BEGIN SOLUTION
    runtime = {e["args"]["correlation"]: e for e in events(trace, "cuda_runtime") if "correlation" in e.get("args", {})}
    cpu = events(trace, "cpu_op")
    kernels = [k for k in events(trace, "kernel") if k.get("args", {}).get("stream") == stream]
    kernels.sort(key=lambda k: _ns(k["ts"]))
    gaps = []
    for prev, nxt in zip(kernels, kernels[1:]):
        start = _ns(prev["ts"]) + _ns(prev["dur"])
        end = _ns(nxt["ts"])
        if end - start <= 0 or end - start < _ns(min_gap_us):
            continue
        gaps.append({"start_us": start / 1000, "end_us": end / 1000, "dur_us": (end - start) / 1000,
                     "after": prev["name"], "before": nxt["name"],
                     "cause": _cause(cpu, runtime.get(nxt.get("args", {}).get("correlation")), start, end)})
    return gaps
    # STARTER
    # raise NotImplementedError("idle_gaps: see README.md, section \"Part 2: GPU idle gaps and the roofline\"")
    # END SOLUTION


# BEGIN SOLUTION
def _cause(cpu: list[dict], launch: dict | None, start: int, end: int) -> str | None:
    """The top-level cpu_op of the launching thread that overlaps [start, end) (ns) the most."""
    if launch is None:
        return None
    mine = [e for e in cpu if (e["pid"], e["tid"]) == (launch["pid"], launch["tid"])]
    top = [e for e, p in zip(mine, parents(mine)) if p is None]      # inside no other cpu_op of the thread
    best = None
    for e in sorted(top, key=lambda e: _ns(e["ts"])):
        overlap = min(_ns(e["ts"]) + _ns(e["dur"]), end) - max(_ns(e["ts"]), start)
        if overlap > 0 and (best is None or overlap > best[0]):
            best = (overlap, e["name"])          # strict >: on a tie the earlier op stays
    return best[1] if best else None
# END SOLUTION


def roofline(flops: float, nbytes: float, peak_flops: float, mem_bw: float) -> dict:
    """Place a kernel of `flops` FLOPs moving `nbytes` bytes under a roofline of
    peak_flops (FLOP/s) and mem_bw (bytes/s): {"ai", "ridge", "attainable", "bound"}."""
    # BEGIN SOLUTION
    if nbytes <= 0:
        raise ValueError(f"roofline: nbytes must be > 0, not {nbytes}")
    ai = flops / nbytes                          # FLOP per byte moved
    ridge = peak_flops / mem_bw                  # the AI where the two roofs meet
    return {"ai": ai, "ridge": ridge, "attainable": min(peak_flops, ai * mem_bw),
            "bound": "memory" if ai < ridge else "compute"}
    # STARTER
    # raise NotImplementedError("roofline: see README.md, section \"Part 2: GPU idle gaps and the roofline\"")
    # END SOLUTION


def kernel_roofline(trace: dict, gpu: dict) -> list[dict]:
    """Per kernel name with args "flops" and "bytes": its totals and its roofline placement on
    gpu = {"peak_flops", "mem_bw"}: {"name", "flops", "bytes", "time_us", "achieved", "ai",
    "attainable", "bound", "efficiency"}, sorted by time_us descending, ties by name."""
    # BEGIN SOLUTION
    rows: dict[str, dict] = {}
    for k in events(trace, "kernel"):
        args = k.get("args", {})
        if "flops" not in args or "bytes" not in args:
            continue
        r = rows.setdefault(k["name"], {"name": k["name"], "flops": 0, "bytes": 0, "ns": 0})
        r["flops"] += args["flops"]
        r["bytes"] += args["bytes"]
        r["ns"] += _ns(k["dur"])
    out = []
    for r in rows.values():
        place = roofline(r["flops"], r["bytes"], gpu["peak_flops"], gpu["mem_bw"])
        achieved = r["flops"] / (r["ns"] * 1e-9)           # FLOP/s over the kernel's own time
        out.append({"name": r["name"], "flops": r["flops"], "bytes": r["bytes"], "time_us": r["ns"] / 1000,
                    "achieved": achieved, "ai": place["ai"], "attainable": place["attainable"],
                    "bound": place["bound"], "efficiency": achieved / place["attainable"]})
    out.sort(key=lambda r: (-r["time_us"], r["name"]))
    return out
    # STARTER
    # raise NotImplementedError("kernel_roofline: see README.md, section \"Part 2: GPU idle gaps and the roofline\"")
    # END SOLUTION
