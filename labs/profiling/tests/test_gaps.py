"""Part 2: kernel launches, GPU idle gaps and their cause, the roofline, on synthetic CUDA traces
(simulated from the secret seed: launches, syncs and CPU-only work leave gaps) and a GPU spec table."""

from __future__ import annotations

import pytest

import adapter
import refs

SECTION = "Part 2: GPU idle gaps and the roofline"
STREAM = 7


def _gpu(i: int) -> dict:
    return refs.gpu_trace(refs.rng(f"gpu-{i}"), STREAM)


@pytest.mark.parametrize("i", [0, 1])
def test_launches(i):
    trace = _gpu(i)
    refs.compare_rows(adapter.call("launches", trace), refs.launches(trace), ("kernel", "launch"),
                      ("kernel_ts_us", "launch_ts_us", "delay_us"), f"launches(gpu trace {i})", SECTION)


@pytest.mark.parametrize("i", [0, 1, 2])
def test_idle_gaps(i):
    trace = _gpu(i)
    want = refs.idle_gaps(trace, STREAM)
    assert len(want) >= 2, "grader: the simulated trace has too few gaps"
    refs.compare_rows(adapter.call("idle_gaps", trace, STREAM), want, ("after", "before", "cause"),
                      ("start_us", "end_us", "dur_us"), f"idle_gaps(gpu trace {i}, stream={STREAM})", SECTION)


def test_idle_gaps_min_gap_is_inclusive():
    trace = _gpu(3)
    every = refs.idle_gaps(trace, STREAM)
    mid = sorted(g["dur_us"] for g in every)[len(every) // 2]     # a gap exactly min_gap_us long is kept
    want = refs.idle_gaps(trace, STREAM, mid)
    refs.compare_rows(adapter.call("idle_gaps", trace, STREAM, mid), want, ("after", "before", "cause"),
                      ("start_us", "end_us", "dur_us"), f"idle_gaps(gpu trace 3, stream={STREAM}, min_gap_us={mid})",
                      SECTION)


def test_idle_gaps_other_stream():
    trace = _gpu(4)
    other = STREAM + 6
    refs.compare_rows(adapter.call("idle_gaps", trace, other), refs.idle_gaps(trace, other),
                      ("after", "before", "cause"), ("start_us", "end_us", "dur_us"),
                      f"idle_gaps(gpu trace 4, stream={other})", SECTION)


def _roof_cases():
    r = refs.rng("roofline")
    # ridge = 300e12 / 1.5e12 = 200 FLOP/byte exactly, so the edge cases are exact in floating point
    spec = {"peak_flops": 300e12, "mem_bw": 1.5e12}
    nbytes = r.randint(1, 1 << 20) * 64
    cases = [(200.0 * nbytes, nbytes), (199.0 * nbytes, nbytes), (0.0, nbytes), (150.0, 1)]
    cases += [(r.uniform(0.1, 1000) * nbytes, nbytes) for _ in range(4)]
    return spec, cases


def test_roofline_placement():
    spec, cases = _roof_cases()
    for flops, nbytes in cases:
        got = adapter.call("roofline", flops, nbytes, spec["peak_flops"], spec["mem_bw"])
        want = refs.roofline(flops, nbytes, spec["peak_flops"], spec["mem_bw"])
        what = f"roofline(flops={flops!r}, nbytes={nbytes}, peak_flops=300e12, mem_bw=1.5e12)"
        assert isinstance(got, dict), f"{what}: returned {type(got).__name__}, expected a dict {refs.where(SECTION)}"
        for k in ("ai", "ridge", "attainable"):
            assert k in got and refs.close(float(got[k]), want[k], rel=1e-9, abs_=0.0), (
                f"{what}: {k} = {got.get(k)!r}, expected {want[k]!r} {refs.where(SECTION)}")
        assert got.get("bound") == want["bound"], (
            f"{what}: bound = {got.get('bound')!r}, expected {want['bound']!r} (AI {want['ai']:.6g}, ridge "
            f"{want['ridge']:.6g}: memory-bound below the ridge) {refs.where(SECTION)}")


@pytest.mark.parametrize("nbytes", [0, -64])
def test_roofline_zero_bytes(nbytes):
    with pytest.raises(ValueError):
        adapter.call("roofline", 1e9, nbytes, 989e12, 3.35e12)
        pytest.fail(f"roofline(nbytes={nbytes}) returned; expected ValueError {refs.where(SECTION)}")


@pytest.mark.parametrize("gpu", ["H100-SXM-bf16", "A100-SXM-fp32", "L4-fp16"])
def test_kernel_roofline(gpu):
    from_specs = {"H100-SXM-bf16": {"peak_flops": 989e12, "mem_bw": 3.35e12},
                  "A100-SXM-fp32": {"peak_flops": 19.5e12, "mem_bw": 2.039e12},
                  "L4-fp16": {"peak_flops": 121e12, "mem_bw": 0.3e12}}[gpu]
    trace = _gpu(5)
    want = refs.kernel_roofline(trace, from_specs)
    refs.compare_rows(adapter.call("kernel_roofline", trace, from_specs), want, ("name", "bound", "flops", "bytes"),
                      ("time_us", "achieved", "ai", "attainable", "efficiency"), f"kernel_roofline(gpu trace 5, {gpu})",
                      SECTION)


# ---- the red team's survivors, closed by class: ties in launches, each clause of the gap-cause rule


def test_launches_tie_by_correlation():
    trace = refs.tied_launch_trace(refs.rng("launch-ties"), STREAM)
    refs.compare_rows(adapter.call("launches", trace), refs.launches(trace), ("kernel", "launch"),
                      ("kernel_ts_us", "launch_ts_us", "delay_us"),
                      "launches(trace of kernels on two streams starting at the same instant; ties by correlation id)",
                      SECTION)


CAUSE_WHY = {"tie": "two top-level ops overlap the gap equally: the earlier one is the cause",
             "other-thread": "another thread's op overlaps the gap more: only the launching thread counts",
             "nested": "a top-level op and its child start together and both cover the gap: only top-level ops count"}


def _check_cause(kind: str):
    trace = refs.cause_trace(refs.rng(f"cause-{kind}"), kind, STREAM)
    want = refs.idle_gaps(trace, STREAM)
    assert len(want) >= 3 and all(g["cause"] for g in want), "grader: the planted cause trace is malformed"
    refs.compare_rows(adapter.call("idle_gaps", trace, STREAM), want, ("after", "before", "cause"),
                      ("start_us", "end_us", "dur_us"), f"idle_gaps(cause trace: {CAUSE_WHY[kind]})", SECTION)


def test_gap_cause_tie_goes_to_the_earlier():
    _check_cause("tie")


def test_gap_cause_on_the_launching_thread():
    _check_cause("other-thread")


def test_gap_cause_top_level_only():
    _check_cause("nested")


# ---- times compared as integer nanoseconds, on gaps too (red team r3: float µs differences)


def test_idle_gaps_in_integer_nanoseconds():
    # real traces hold whole nanoseconds: kernels that touch in integer ns can have a float difference a hair
    # above 0 (no gap), and a gap exactly min_gap_us long one a hair below min_gap_us (kept)
    trace, min_gap = refs.off_grid_gap_trace(refs.rng("off-grid-gaps"), STREAM)
    why = ("times compared as integer nanoseconds, round(t * 1000): kernels touching in integer ns leave no gap, "
           "a gap exactly min_gap_us long is kept, whatever the float ts + dur sums say")
    for min_gap_us in (0.0, min_gap):
        want = refs.idle_gaps(trace, STREAM, min_gap_us)
        assert len(want) >= 2, "grader: the off-grid gap trace is malformed"
        refs.compare_rows(adapter.call("idle_gaps", trace, STREAM, min_gap_us), want, ("after", "before", "cause"),
                          ("start_us", "end_us", "dur_us"),
                          f"idle_gaps(off-grid trace, stream={STREAM}, min_gap_us={min_gap_us!r}; {why})", SECTION)
