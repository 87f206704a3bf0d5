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
    raise NotImplementedError("profile_cpu: see README.md, section \"Part 1: the kernel table\"")


# ----------------------------------------------------------------- part 1: the kernel table




def self_times(evs: list[dict]) -> list[float]:
    """Self time (µs) of each event of `evs` (one category), in the same order.

    An event's children are the events of `evs` on the same (pid, tid) whose
    interval lies inside its own ([ts, ts + dur], ends included); its DIRECT
    children are those inside no other child. Self time = dur - the durations
    of the direct children.
    """
    raise NotImplementedError("self_times: see README.md, section \"Part 1: the kernel table\"")


def op_table(trace: dict, cat: str = "kernel") -> list[dict]:
    """One row per distinct name among the events of `cat`:
    {"name", "calls", "total_us", "self_us", "mean_us", "pct"},
    sorted by self_us descending, ties by name ascending."""
    raise NotImplementedError("op_table: see README.md, section \"Part 1: the kernel table\"")


def top_k(trace: dict, cat: str, k: int, by: str = "self_us") -> list[str]:
    """The names of the k rows of op_table(trace, cat) with the largest `by`
    ("self_us", "total_us", "calls" or "mean_us"), ties by name ascending."""
    raise NotImplementedError("top_k: see README.md, section \"Part 1: the kernel table\"")


# ----------------------------------------------------------------- part 2: gaps and the roofline


def launches(trace: dict) -> list[dict]:
    """Each kernel with the cuda_runtime event that launched it (same args["correlation"]):
    {"kernel", "launch", "kernel_ts_us", "launch_ts_us", "delay_us"}, sorted by kernel start
    (ties by correlation id). A kernel whose launch is not in the trace is left out."""
    raise NotImplementedError("launches: see README.md, section \"Part 2: GPU idle gaps and the roofline\"")


def idle_gaps(trace: dict, stream: int, min_gap_us: float = 0.0) -> list[dict]:
    """The idle gaps of one GPU stream: {"start_us", "end_us", "dur_us", "after", "before", "cause"}."""
    raise NotImplementedError("idle_gaps: see README.md, section \"Part 2: GPU idle gaps and the roofline\"")




def roofline(flops: float, nbytes: float, peak_flops: float, mem_bw: float) -> dict:
    """Place a kernel of `flops` FLOPs moving `nbytes` bytes under a roofline of
    peak_flops (FLOP/s) and mem_bw (bytes/s): {"ai", "ridge", "attainable", "bound"}."""
    raise NotImplementedError("roofline: see README.md, section \"Part 2: GPU idle gaps and the roofline\"")


def kernel_roofline(trace: dict, gpu: dict) -> list[dict]:
    """Per kernel name with args "flops" and "bytes": its totals and its roofline placement on
    gpu = {"peak_flops", "mem_bw"}: {"name", "flops", "bytes", "time_us", "achieved", "ai",
    "attainable", "bound", "efficiency"}, sorted by time_us descending, ties by name."""
    raise NotImplementedError("kernel_roofline: see README.md, section \"Part 2: GPU idle gaps and the roofline\"")
