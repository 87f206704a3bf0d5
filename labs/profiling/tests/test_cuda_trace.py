"""Part 5 (GPU only): parts 1-3's functions on a REAL CUDA trace of the slow model (kernels, launch
correlations, streams and syncs written by the profiler itself), against the grader's references.
Not graded without a CUDA GPU."""

from __future__ import annotations

import pytest

from roadmap_cli import grading_kit as kit

import adapter
import refs

SECTION = "Part 5: a real CUDA trace"

pytestmark = pytest.mark.skipif(not kit.has_cuda(), reason="needs a CUDA GPU")


def _run():
    r = refs.rng("cuda")
    cfg = (2, r.choice([16, 32]), r.randint(9, 14), r.randrange(1 << 30))
    # The harness's own syncs after the last kernel (its synchronize, the profiler's on exit) are not the model's.
    return cfg, {name: refs.without_trailing_syncs(trace) for name, trace in adapter.cuda_profiles(*cfg).items()}


RUN = kit.PerSeedCache(_run)


def _main_stream(trace) -> int:
    streams: dict = {}
    for k in refs.events(trace, "kernel"):
        s = k.get("args", {}).get("stream")
        streams[s] = streams.get(s, 0) + 1
    assert streams, f"grader: the CUDA profile holds no kernel events {refs.where(SECTION)}"
    return max(streams, key=lambda s: (streams[s], str(s)))


def test_cuda_kernel_table():
    cfg, out = RUN()
    trace = out["slow"]
    refs.compare_rows(adapter.call("op_table", trace, "kernel"), refs.op_table(trace, "kernel"), ("name", "calls"),
                      ("total_us", "self_us", "mean_us", "pct"), f"op_table(CUDA trace of slow_forward {cfg[:3]}, 'kernel')",
                      SECTION)


def test_cuda_launches():
    cfg, out = RUN()
    trace = out["slow"]
    want = refs.launches(trace)
    assert want, f"grader: no kernel of the CUDA profile has its launch in the trace {refs.where(SECTION)}"
    refs.compare_rows(adapter.call("launches", trace), want, ("kernel", "launch"),
                      ("kernel_ts_us", "launch_ts_us", "delay_us"), f"launches(CUDA trace {cfg[:3]})", SECTION)


def test_cuda_idle_gaps():
    cfg, out = RUN()
    trace = out["slow"]
    stream = _main_stream(trace)
    want = refs.idle_gaps(trace, stream)
    refs.compare_rows(adapter.call("idle_gaps", trace, stream), want, ("after", "before", "cause"),
                      ("start_us", "end_us", "dur_us"), f"idle_gaps(CUDA trace {cfg[:3]}, stream={stream})", SECTION)


def test_cuda_bottlenecks():
    cfg, out = RUN()
    got = adapter.call("find_bottlenecks", out["slow"])
    want = refs.find_bottlenecks(out["slow"])
    assert want == sorted(refs.THRESHOLDS), f"grader: the CUDA profile shows {refs.bottleneck_counts(out['slow'])}"
    assert got == want, (f"find_bottlenecks(CUDA trace of slow_forward {cfg[:3]}): {got}, expected {want} "
                         f"(counts {refs.bottleneck_counts(out['slow'])}) {refs.where(SECTION)}")
    fast = adapter.call("find_bottlenecks", out["fast"])
    assert fast == [] and refs.find_bottlenecks(out["fast"]) == [], (
        f"CUDA trace of your fast_forward: find_bottlenecks gives {fast}, the grader's "
        f"{refs.find_bottlenecks(out['fast'])} (counts {refs.bottleneck_counts(out['fast'])}); expected none "
        f"{refs.where(SECTION)}")
