"""The shared GPU timing harness, tested on CPU with fake timers and clocks:
the stopping rule, warm-up and alternation, fresh inputs, output checks,
score fraction, geometric mean, device peaks and impossible-time rejection."""

from __future__ import annotations

import math

import pytest

from roadmap_cli.grading_kit import gpu_peaks, timing
from roadmap_cli.grading_kit.timing import StopRule


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeTimer:
    """Returns scripted device times per function; advances the fake clock."""

    def __init__(self, clock: FakeClock, times: dict[str, object], host_extra_ms: float = 0.0) -> None:
        self.clock = clock
        self.times = times  # fn name -> constant float or a callable(call_index) -> float
        self.host_extra_ms = host_extra_ms
        self.calls: list[str] = []
        self.prepared = 0

    def prepare(self) -> None:
        self.prepared += 1

    def time_call(self, fn, args):
        name = fn.__name__
        index = sum(1 for c in self.calls if c == name)
        self.calls.append(name)
        out = fn(*args)
        t = self.times[name]
        ms = t(index) if callable(t) else t
        self.clock.now += ms / 1e3
        return ms, ms + self.host_extra_ms, out


def learner(*args):
    return ("learner", args)


def baseline(*args):
    return ("baseline", args)


# ---------------------------------------------------------------- stopping rule


def test_stop_rule_needs_min_repeats_even_when_noise_free():
    rule = StopRule(min_repeats=10)
    assert not timing.should_stop([1.0] * 9, 0.0, rule)
    assert timing.should_stop([1.0] * 10, 0.0, rule)


def test_stop_rule_keeps_going_while_noisy_and_stops_at_max():
    rule = StopRule(min_repeats=10, max_repeats=200, time_cap_s=1e9)
    noisy = [1.0, 3.0] * 10  # stderr/mean ~ 11%
    assert not timing.should_stop(noisy, 0.0, rule)
    assert timing.should_stop([1.0, 3.0] * 100, 0.0, rule)  # 200 = max_repeats


def test_stop_rule_time_cap_needs_three_samples():
    rule = StopRule(time_cap_s=5.0)
    assert not timing.should_stop([1.0, 9.0], 6.0, rule)
    assert timing.should_stop([1.0, 9.0, 5.0], 6.0, rule)
    assert not timing.should_stop([1.0, 9.0, 5.0], 4.0, rule)


def test_summarize_median_min_mean_stderr():
    t = timing.summarize([4.0, 1.0, 2.0, 3.0], [5.0, 5.0, 6.0, 6.0])
    assert (t.median_ms, t.min_ms, t.mean_ms, t.repeats, t.host_ms) == (2.5, 1.0, 2.5, 4, 5.5)
    assert t.stderr_ms == pytest.approx(math.sqrt(5 / 3) / 2)


# ---------------------------------------------------------------- the loop


def test_benchmark_stops_after_ten_stable_samples_and_flushes_each_call():
    clock = FakeClock()
    timer = FakeTimer(clock, {"learner": 2.0})
    result = timing.benchmark(learner, timer=timer, clock=clock, warmup_ms=0)
    assert result.repeats == 10
    assert result.median_ms == 2.0
    # 1 untimed + 3 estimate + 10 timed calls, each after a prepare (sync + flush)
    assert timer.prepared == 14


def test_benchmark_warmup_fills_about_25_ms():
    calls = []

    def fn():
        calls.append(1)

    clock = FakeClock()
    timing.benchmark(fn, timer=FakeTimer(clock, {"fn": 1.0}), clock=clock, warmup_ms=25)
    # 1 untimed + 3 estimates + 22 warm-up calls (25 ms at 1 ms/call) + 10 timed
    assert len(calls) == 1 + 25 + 10


def test_benchmark_noisy_function_runs_to_the_cap_or_max():
    clock = FakeClock()
    timer = FakeTimer(clock, {"learner": lambda i: 1.0 if i % 2 else 3.0})
    result = timing.benchmark(learner, timer=timer, clock=clock, warmup_ms=0, rule=StopRule(time_cap_s=0.1))
    # 2 ms per call, cap 100 ms -> about 50 samples, far from 1% stderr, under the 200 max
    assert 45 <= result.repeats <= 55
    result = timing.benchmark(
        learner,
        timer=FakeTimer(clock, {"learner": lambda i: 1.0 if i % 2 else 3.0}),
        clock=clock,
        warmup_ms=0,
        rule=StopRule(time_cap_s=1e9),
    )
    assert result.repeats == 200


def test_fresh_inputs_every_timed_round():
    made = []

    def make_inputs():
        made.append(len(made))
        return (len(made),)

    seen = []

    def fn(x):
        seen.append(x)

    clock = FakeClock()
    timing.benchmark(fn, make_inputs=make_inputs, timer=FakeTimer(clock, {"fn": 1.0}), clock=clock, warmup_ms=0)
    timed = seen[-10:]
    assert len(set(timed)) == 10  # every timed call had its own inputs


def test_compare_alternates_order_and_shares_inputs():
    clock = FakeClock()
    timer = FakeTimer(clock, {"learner": 2.0, "baseline": 1.0})
    counter = iter(range(10**6))
    cmp = timing.compare_to_baseline(
        learner,
        baseline,
        lambda: (next(counter),),
        timer=timer,
        clock=clock,
        warmup_ms=0,
        peak=gpu_peaks.device_peak("NVIDIA H100 80GB HBM3"),
        flops=2 * 1024**3,
    )
    timed = timer.calls[-20:]
    assert timed[:4] == ["learner", "baseline", "baseline", "learner"]
    assert cmp.ratio == pytest.approx(0.5)
    assert cmp.tflops == pytest.approx(2 * 1024**3 / 2e-3 / 1e12)
    assert cmp.baseline_tflops == pytest.approx(2 * cmp.tflops)
    assert cmp.pct_of_peak == pytest.approx(100 * cmp.tflops / 989.4)
    assert not cmp.impossible


def test_check_sees_first_and_last_learner_output():
    checked = []
    clock = FakeClock()
    timing.compare_to_baseline(
        learner,
        baseline,
        lambda: (1,),
        timer=FakeTimer(clock, {"learner": 1.0, "baseline": 1.0}),
        clock=clock,
        warmup_ms=0,
        check=lambda out, args: checked.append(out[0]),
        peak=None,
    )
    assert checked == ["learner", "learner"]


def test_check_failure_propagates():
    def check(out, args):
        raise AssertionError("wrong output while timed")

    clock = FakeClock()
    with pytest.raises(AssertionError, match="wrong output"):
        timing.benchmark(learner, timer=FakeTimer(clock, {"learner": 1.0}), clock=clock, check=check)


def test_host_time_cross_check():
    assert not timing.host_time_suspicious(1.0, 1.3)
    assert timing.host_time_suspicious(1.0, 5.0)
    assert not timing.host_time_suspicious(0.01, 0.05)  # Python launch overhead is not hidden work
    clock = FakeClock()
    t = timing.benchmark(learner, timer=FakeTimer(clock, {"learner": 0.5}, host_extra_ms=4.0), clock=clock)
    assert t.hidden_work_suspected


# ---------------------------------------------------------------- scores


def test_score_fraction_full_at_80_percent_linear_below():
    assert timing.score_fraction(1.3) == 1.0
    assert timing.score_fraction(0.8) == 1.0
    assert timing.score_fraction(0.4) == pytest.approx(0.5)
    assert timing.score_fraction(0.0) == 0.0
    assert timing.score_fraction(float("nan")) == 0.0
    assert timing.score_fraction(0.5, full_at=1.0) == 0.5


def test_geometric_mean():
    assert timing.geometric_mean([0.5, 2.0]) == pytest.approx(1.0)
    assert timing.geometric_mean([1.0, 8.0, 1.0]) == pytest.approx(2.0)
    assert timing.geometric_mean([1.0, 0.0]) == 0.0
    with pytest.raises(ValueError):
        timing.geometric_mean([])


def test_flush_buffer_is_twice_l2_or_256mb():
    assert timing.flush_bytes(50 * 2**20) == 100 * 2**20
    assert timing.flush_bytes(0) == 256 * 2**20
    assert timing.flush_bytes(None) == 256 * 2**20


# ---------------------------------------------------------------- devices


@pytest.mark.parametrize(
    "torch_name, expected",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA RTX A6000", "RTX A6000"),
    ],
)
def test_device_peak_lookup(torch_name, expected):
    assert gpu_peaks.device_peak(torch_name).name == expected


def test_unknown_device_and_dtype_peaks():
    assert gpu_peaks.device_peak("Some Future Accelerator") is None
    h100 = gpu_peaks.device_peak("NVIDIA H100 80GB HBM3")
    assert h100.tflops_for("torch.float16") == h100.tflops_for("bf16") == 989.4
    assert h100.tflops_for("float32") == h100.tf32_tflops
    assert h100.tflops_for("fp32-simt") == h100.fp32_tflops == 66.9
    with pytest.raises(ValueError):
        h100.tflops_for("int8")


def test_impossible_times_are_rejected():
    h100 = gpu_peaks.device_peak("NVIDIA H100 80GB HBM3")
    flops = 2 * 4096**3  # 137 GFLOP: at least 0.139 ms at 989 TFLOP/s
    assert gpu_peaks.roofline_ms(h100, flops=flops) == pytest.approx(flops / 989.4e12 * 1e3)
    assert not gpu_peaks.is_impossible(0.2, h100, flops=flops)
    assert gpu_peaks.is_impossible(0.05, h100, flops=flops)
    assert gpu_peaks.is_impossible(0.0, h100, flops=flops)
    # memory bound: 1 GB at 3.35 TB/s takes >= 0.3 ms
    assert gpu_peaks.is_impossible(0.1, h100, bytes_moved=1e9)
    # an unknown GPU is held to twice the fastest known card, never looser
    assert gpu_peaks.is_impossible(0.001, None, flops=flops)
    assert not gpu_peaks.is_impossible(0.1, None, flops=flops)


def test_comparison_flags_an_impossible_learner():
    fast = timing.summarize([0.01] * 10, [0.02] * 10)
    base = timing.summarize([0.3] * 10, [0.31] * 10)
    cmp = timing.build_comparison(
        fast, base, flops=2 * 4096**3, peak=gpu_peaks.device_peak("NVIDIA H200"), device_name="H200 SXM"
    )
    assert cmp.impossible
    assert "IMPOSSIBLE" in cmp.summary()
    honest = timing.summarize([0.3] * 10, [0.31] * 10)
    assert not timing.build_comparison(
        honest, base, flops=2 * 4096**3, peak=gpu_peaks.device_peak("NVIDIA H200")
    ).impossible


def test_learner_with_hidden_work_is_scored_with_host_time():
    learner = timing.summarize([0.1] * 10, [2.0] * 10)  # events see 0.1 ms, the host waited 2 ms
    baseline = timing.summarize([1.0] * 10, [1.1] * 10)
    cmp = timing.build_comparison(
        learner, baseline, flops=2 * 1024**3, peak=gpu_peaks.device_peak("NVIDIA H100 80GB HBM3")
    )
    assert cmp.ratio == pytest.approx(0.5)  # 1.0 / 2.0, not 1.0 / 0.1
    assert cmp.tflops == pytest.approx(2 * 1024**3 / 2e-3 / 1e12)
    assert any("host time" in w for w in cmp.warnings)
    honest = timing.summarize([0.5] * 10, [0.55] * 10)
    assert timing.build_comparison(honest, baseline).ratio == pytest.approx(2.0)


def test_cuda_timer_flushes_outside_the_events_and_syncs_device_wide(monkeypatch):
    """CudaTimer's order of operations, with torch.cuda faked (no GPU here):
    sync -> flush (2x L2) -> sync, then a spin kernel -> start event -> call -> end event -> sync."""
    import torch

    log = []
    event_names = iter(["queued", "start", "end"])  # the order CudaTimer makes its events in

    class FakeEvent:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.name = next(event_names)

        def record(self):
            log.append(f"record-{self.name}")

        def elapsed_time(self, other):
            return 1.25

    class FakeBuffer:
        def zero_(self):
            log.append("flush")

    class Props:
        L2_cache_size = 50 * 2**20

    allocated = {}

    def fake_empty(n, dtype=None, device=None):
        allocated["bytes"] = n * 4
        return FakeBuffer()

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: log.append("sync"))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append("spin"), raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: Props())
    monkeypatch.setattr(torch, "empty", fake_empty)
    timer = timing.CudaTimer("cuda")
    assert allocated["bytes"] == 100 * 2**20
    log.clear()
    timer.prepare()
    device_ms, host_ms, out = timer.time_call(lambda x: log.append("call") or x * 2, (21,))
    assert log == ["sync", "flush", "sync", "record-queued", "spin", "record-start", "call", "record-end", "sync"]
    assert (device_ms, out) == (1.25, 42) and isinstance(host_ms, float)


# ---------------------------------------------------------------- CudaTimer on a fake device


class _FakeCuda:
    """torch.cuda as CudaTimer uses it, on a scripted stream: a log of what was queued, in order.
    _sleep(c) keeps the stream busy for c / 2000 ms (a 2 GHz card)."""

    def __init__(self, log: list) -> None:
        self.log = log
        self.stream_ms = 0.0

    def synchronize(self, device=None):
        self.log.append("sync")

    def _sleep(self, cycles):
        self.log.append(("spin", cycles))
        self.stream_ms += cycles / 2e6

    def Event(self, enable_timing=True):  # noqa: N802 - torch's name
        cuda = self

        class Event:
            def record(self):
                self.at = cuda.stream_ms
                cuda.log.append("event")

            def elapsed_time(self, other):
                return other.at - self.at

        return Event()


def test_cuda_timer_queues_a_spin_before_the_start_event():
    """Issue 37: after the synchronize the stream is idle, so a start event recorded right away fires
    before Python has launched the kernel and the launch cost is timed. The timer queues a spin
    kernel first; host time leaves the spin out (else every short kernel would look like hidden work)."""
    from types import SimpleNamespace

    from roadmap_cli.grading_kit import timing

    log: list = []
    cuda = _FakeCuda(log)
    timer = object.__new__(timing.CudaTimer)
    timer.torch, timer.device = SimpleNamespace(cuda=cuda), "cuda:0"
    timer.queued, timer.start, timer.end = cuda.Event(), cuda.Event(), cuda.Event()
    timer.spin_cycles = timer._cycles_for(timing.SPIN_MS)
    assert timer.spin_cycles == 1_000_000  # 0.5 ms at the fake card's 2 GHz, measured
    log.clear()

    def kernel():
        log.append("launch")
        cuda.stream_ms += 0.01  # a 10 us kernel
        return "out"

    device_ms, host_ms, out = timer.time_call(kernel, ())
    assert log == ["event", ("spin", 1_000_000), "event", "launch", "event", "sync"]
    assert out == "out" and abs(device_ms - 0.01) < 1e-9
    assert host_ms < timing.SPIN_MS and not timing.host_time_suspicious(device_ms, host_ms)
