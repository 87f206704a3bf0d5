"""The one GPU timing harness every performance part uses (see GRADING.md).

How one measurement is taken (CudaTimer):
    synchronize -> flush L2 (write a buffer >= 2x the L2 size) -> synchronize
    -> queue a spin kernel (SPIN_MS) -> start event -> call -> end event
    -> synchronize
The flush stays outside the events, so every timed call starts with a cold
cache, as a kernel inside a real model would. The spin keeps the stream busy
while Python launches the call: without it the stream is idle after the
synchronize, the start event fires at once, and the 10-40 us of launch cost
would be timed (they dominate a short kernel). Host time (perf_counter around
the events, including the final synchronize, less the spin) is kept as a
cross-check: if it is much longer than the event time, work was hidden on
another stream, and the learner is scored with the host time (build_comparison).

The loop (`_run_interleaved`):
    one untimed call per function (compile / autotune), then about 25 ms of
    warm-up (at least 3 calls), then timed rounds. With a baseline, each round
    times the learner and the baseline back to back, alternating which goes
    first, so clock or thermal drift hits both the same way. Fresh inputs come
    from `make_inputs()` before every timed call (outside the events).
    Stop when every function has std-err/mean < 1% and >= 10 repeats, or 200
    repeats, or the time cap (with at least 3 repeats).

Public API:
    benchmark(fn, make_inputs=None, ...) -> Timing
    compare_to_baseline(learner_fn, baseline_fn, make_inputs, flops=, bytes_moved=, dtype=) -> Comparison
    score_fraction(ratio, full_at=0.8), geometric_mean(values)

The loop takes its timer and clock as arguments, so its logic is unit-tested
on CPU with fake timers (tests/test_grading_kit_timing.py).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from roadmap_cli.grading_kit.gpu_peaks import DevicePeak, current_device_peak, is_impossible, roofline_ms

DEFAULT_FLUSH_BYTES = 256 * 1024 * 1024  # when the L2 size is unknown (triton.testing does the same)
# How long the spin kernel queued before each start event runs: far longer than a launch from Python
# (tens of us), short next to a measurement's other costs (the flush writes >= 2x L2).
SPIN_MS = 0.5


@dataclass(frozen=True)
class StopRule:
    """When to stop timing: std-err/mean < rel_stderr with min..max repeats, or the cap."""

    rel_stderr: float = 0.01
    min_repeats: int = 10
    max_repeats: int = 200
    time_cap_s: float = 10.0
    min_repeats_at_cap: int = 3  # a very slow kernel still gets a median of 3


@dataclass(frozen=True)
class Timing:
    """Summary of the timed calls of one function (all in milliseconds)."""

    median_ms: float
    min_ms: float
    mean_ms: float
    stderr_ms: float
    repeats: int
    host_ms: float  # median host-side time per call (perf_counter + synchronize)
    samples_ms: tuple[float, ...] = field(default=(), repr=False)

    @property
    def rel_stderr(self) -> float:
        return self.stderr_ms / self.mean_ms if self.mean_ms > 0 else math.inf

    @property
    def hidden_work_suspected(self) -> bool:
        return host_time_suspicious(self.median_ms, self.host_ms)


@dataclass(frozen=True)
class Comparison:
    """The learner's function timed against a baseline in the same process."""

    learner: Timing
    baseline: Timing
    ratio: float  # baseline median / learner median: 1.0 = as fast as the baseline (see build_comparison)
    tflops: float | None  # learner's throughput (from its median), if flops given
    baseline_tflops: float | None
    pct_of_peak: float | None  # learner's % of the device's compute peak (or bandwidth peak if only bytes given)
    impossible: bool  # the learner's fastest call beats the roofline: the work was not done
    device: str
    warnings: tuple[str, ...] = ()

    def summary(self) -> str:
        parts = [
            f"learner {self.learner.median_ms:.4f} ms (min {self.learner.min_ms:.4f}, n={self.learner.repeats})",
            f"baseline {self.baseline.median_ms:.4f} ms (n={self.baseline.repeats})",
            f"{100 * self.ratio:.1f}% of baseline speed",
        ]
        if self.tflops is not None:
            parts.append(f"{self.tflops:.1f} TFLOP/s")
        if self.pct_of_peak is not None:
            parts.append(f"{self.pct_of_peak:.1f}% of {self.device} peak")
        return "; ".join(parts + list(self.warnings))


# ---------------------------------------------------------------- pure logic


def should_stop(samples_ms: Sequence[float], elapsed_s: float, rule: StopRule) -> bool:
    """The stopping rule for one function's samples."""
    n = len(samples_ms)
    if n >= rule.max_repeats:
        return True
    if elapsed_s >= rule.time_cap_s and n >= rule.min_repeats_at_cap:
        return True
    if n < max(rule.min_repeats, 2):
        return False
    mean = statistics.fmean(samples_ms)
    if mean <= 0:
        return False
    stderr = statistics.stdev(samples_ms) / math.sqrt(n)
    return stderr / mean < rule.rel_stderr


def summarize(samples_ms: Sequence[float], host_ms: Sequence[float]) -> Timing:
    if not samples_ms:
        raise ValueError("no timed samples")
    n = len(samples_ms)
    stderr = statistics.stdev(samples_ms) / math.sqrt(n) if n > 1 else math.inf
    return Timing(
        median_ms=statistics.median(samples_ms),
        min_ms=min(samples_ms),
        mean_ms=statistics.fmean(samples_ms),
        stderr_ms=stderr,
        repeats=n,
        host_ms=statistics.median(host_ms) if host_ms else math.nan,
        samples_ms=tuple(samples_ms),
    )


def host_time_suspicious(event_ms: float, host_ms: float, *, factor: float = 1.5, slack_ms: float = 0.2) -> bool:
    """Host time far above event time: the call waited for work the events did
    not see (another stream). `slack_ms` absorbs Python launch overhead."""
    if math.isnan(host_ms):
        return False
    return host_ms > factor * event_ms + slack_ms


def geometric_mean(values: Sequence[float]) -> float:
    """Geometric mean of positive ratios (how per-shape speedups are aggregated)."""
    if not values:
        raise ValueError("geometric mean of nothing")
    if any(not v > 0 for v in values):
        return 0.0
    return math.exp(statistics.fmean(math.log(v) for v in values))


def score_fraction(ratio: float, full_at: float = 0.8) -> float:
    """Partial credit for a speed ratio (baseline time / learner time):
    1.0 at `full_at` (80% of the baseline's speed) or better, linear below, 0 for nonsense."""
    if not (ratio > 0 and math.isfinite(ratio)) or full_at <= 0:
        return 0.0
    return min(1.0, ratio / full_at)


def flush_bytes(l2_bytes: int | None) -> int:
    """Size of the L2 flush buffer: at least 2x L2, 256 MiB if unknown."""
    if not l2_bytes or l2_bytes <= 0:
        return DEFAULT_FLUSH_BYTES
    return 2 * int(l2_bytes)


# ---------------------------------------------------------------- timers


class Timer(Protocol):
    def prepare(self) -> None:
        """Before a timed call: synchronize and flush caches (not timed)."""

    def time_call(self, fn: Callable[..., Any], args: tuple) -> tuple[float, float, Any]:
        """Run fn(*args) once; return (device ms, host ms, output)."""


class CudaTimer:
    """CUDA events around the call; L2 flush and synchronize outside them."""

    def __init__(self, device: Any = None) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device or "cuda")
        props = torch.cuda.get_device_properties(self.device)
        size = flush_bytes(getattr(props, "L2_cache_size", 0))
        self.flush_buffer = torch.empty(size // 4, dtype=torch.int32, device=self.device)
        self.queued = torch.cuda.Event(enable_timing=True)  # before the spin: host time leaves the spin out
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.spin_cycles = self._cycles_for(SPIN_MS)

    def _cycles_for(self, ms: float) -> int:
        """torch.cuda._sleep's cycle count for `ms` on this GPU, measured once (clocks differ per card)."""
        trial = 1_000_000
        self.torch.cuda.synchronize(self.device)
        self.start.record()
        self.torch.cuda._sleep(trial)
        self.end.record()
        self.torch.cuda.synchronize(self.device)
        took_ms = self.start.elapsed_time(self.end)
        return max(10_000, int(trial * ms / took_ms)) if took_ms > 0 else trial

    def prepare(self) -> None:
        self.torch.cuda.synchronize(self.device)
        self.flush_buffer.zero_()  # writes 2x L2 of data: whatever was cached is evicted
        self.torch.cuda.synchronize(self.device)

    def time_call(self, fn, args):
        host_start = time.perf_counter()
        self.queued.record()
        # The stream is busy spinning while Python launches fn: the start event fires right before
        # fn's first kernel, not before its launch.
        self.torch.cuda._sleep(self.spin_cycles)
        self.start.record()
        out = fn(*args)
        self.end.record()
        self.torch.cuda.synchronize(self.device)  # device-wide: catches work on other streams too
        host_ms = 1e3 * (time.perf_counter() - host_start) - self.queued.elapsed_time(self.start)
        return self.start.elapsed_time(self.end), host_ms, out


class HostTimer:
    """Wall-clock timing for CPU code (never used to grade GPU kernels)."""

    def prepare(self) -> None:
        pass

    def time_call(self, fn, args):
        start = time.perf_counter()
        out = fn(*args)
        ms = 1e3 * (time.perf_counter() - start)
        return ms, ms, out


def default_timer() -> Timer:
    import torch

    return CudaTimer() if torch.cuda.is_available() else HostTimer()


# ---------------------------------------------------------------- the loop


def _args(make_inputs: Callable[[], Any] | None) -> tuple:
    if make_inputs is None:
        return ()
    made = make_inputs()
    return made if isinstance(made, tuple) else (made,)


def _run_interleaved(
    fns: Sequence[Callable[..., Any]],
    make_inputs: Callable[[], Any] | None,
    *,
    timer: Timer,
    rule: StopRule,
    warmup_ms: float = 25.0,
    check: Callable[[Any, tuple], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> list[Timing]:
    """Time each of `fns` on the same fresh inputs, round by round, alternating order.

    `check(output, args)` (optional) validates the first function's output on
    its first and last timed call, so a kernel cannot get fast by going wrong.
    """
    # 1. one untimed call each: JIT compile, autotune, lazy init.
    for fn in fns:
        args = _args(make_inputs)
        timer.prepare()
        fn(*args)
    # 2. warm-up: estimate the per-call time from 3 calls, then fill ~warmup_ms.
    warm_args = _args(make_inputs)
    estimate_ms = 0.0
    for fn in fns:
        for _ in range(3):
            timer.prepare()
            estimate_ms += timer.time_call(fn, warm_args)[0]
    per_round_ms = max(estimate_ms / 3, 1e-3)
    for _ in range(min(1000, max(0, math.ceil(warmup_ms / per_round_ms) - 3))):
        for fn in fns:
            fn(*warm_args)
    # 3. timed rounds.
    samples: list[list[float]] = [[] for _ in fns]
    hosts: list[list[float]] = [[] for _ in fns]
    started = clock()
    round_index = 0
    last_output: Any = None
    last_args: tuple = ()
    while True:
        elapsed = clock() - started
        if all(should_stop(s, elapsed, rule) for s in samples):
            break
        order = range(len(fns)) if round_index % 2 == 0 else reversed(range(len(fns)))
        args = _args(make_inputs)
        for i in order:
            timer.prepare()
            device_ms, host_ms, out = timer.time_call(fns[i], args)
            samples[i].append(device_ms)
            hosts[i].append(host_ms)
            if i == 0:
                if check is not None and round_index == 0:
                    check(out, args)
                last_output, last_args = out, args
        round_index += 1
    if check is not None and round_index > 1:
        check(last_output, last_args)
    return [summarize(s, h) for s, h in zip(samples, hosts)]


def benchmark(
    fn: Callable[..., Any],
    *,
    make_inputs: Callable[[], Any] | None = None,
    rule: StopRule | None = None,
    warmup_ms: float = 25.0,
    check: Callable[[Any, tuple], None] | None = None,
    timer: Timer | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time fn(*make_inputs()) (fresh inputs per call; fn() if make_inputs is None)."""
    return _run_interleaved(
        [fn],
        make_inputs,
        timer=timer or default_timer(),
        rule=rule or StopRule(),
        warmup_ms=warmup_ms,
        check=check,
        clock=clock,
    )[0]


def compare_to_baseline(
    learner_fn: Callable[..., Any],
    baseline_fn: Callable[..., Any],
    make_inputs: Callable[[], Any] | None,
    *,
    flops: float = 0.0,
    bytes_moved: float = 0.0,
    dtype: object = "fp16",
    peak: DevicePeak | None = None,
    device_name: str | None = None,
    rule: StopRule | None = None,
    warmup_ms: float = 25.0,
    check: Callable[[Any, tuple], None] | None = None,
    timer: Timer | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Comparison:
    """Time the learner against the baseline, interleaved, on the same fresh inputs.

    `flops` / `bytes_moved` describe one call (matmul: 2*M*N*K flops); they give
    TFLOP/s, % of peak, and the impossible-time check. `peak` defaults to the
    current device's entry in gpu_peaks.py.
    """
    if peak is None and timer is None:
        peak = current_device_peak()
    if device_name is None:
        device_name = peak.name if peak else "unknown GPU"
    learner, baseline = _run_interleaved(
        [learner_fn, baseline_fn],
        make_inputs,
        timer=timer or default_timer(),
        rule=rule or StopRule(),
        warmup_ms=warmup_ms,
        check=check,
        clock=clock,
    )
    return build_comparison(
        learner, baseline, flops=flops, bytes_moved=bytes_moved, dtype=dtype, peak=peak, device_name=device_name
    )


def build_comparison(
    learner: Timing,
    baseline: Timing,
    *,
    flops: float = 0.0,
    bytes_moved: float = 0.0,
    dtype: object = "fp16",
    peak: DevicePeak | None = None,
    device_name: str = "unknown GPU",
) -> Comparison:
    """Turn two Timings into ratios, throughput, % of peak and the roofline check.

    When the learner's host time is far above its event time (work hidden on
    another stream, or heavy Python around the launch), the learner is scored
    with the host time: the slower of two disagreeing measurements.
    """
    learner_ms = learner.host_ms if learner.hidden_work_suspected else learner.median_ms
    ratio = baseline.median_ms / learner_ms if learner_ms > 0 else math.inf
    tflops = flops / (learner_ms * 1e-3) / 1e12 if flops else None
    baseline_tflops = flops / (baseline.median_ms * 1e-3) / 1e12 if flops else None
    pct = None
    if peak is not None and (flops or bytes_moved):
        best_ms = roofline_ms(peak, flops=flops, bytes_moved=bytes_moved, dtype=dtype)
        pct = 100.0 * best_ms / learner_ms
    # Judge the fastest call, not the median: one impossibly fast call is already proof.
    impossible = is_impossible(learner.min_ms, peak, flops=flops, bytes_moved=bytes_moved, dtype=dtype)
    warnings = []
    if impossible:
        warnings.append(
            f"IMPOSSIBLE: {learner.min_ms:.4f} ms beats the roofline of {device_name} "
            f"({roofline_ms(peak, flops=flops, bytes_moved=bytes_moved, dtype=dtype) if peak else 0:.4f} ms)"
        )
    if learner.hidden_work_suspected:
        warnings.append(
            f"host time {learner.host_ms:.4f} ms >> event time {learner.median_ms:.4f} ms "
            "(work on another stream, or slow Python around the launch?): scored with the host time"
        )
    return Comparison(learner, baseline, ratio, tflops, baseline_tflops, pct, impossible, device_name, tuple(warnings))
