"""Part 3: find_bottlenecks on synthetic traces (every subset of the three bottlenecks planted, the
absent ones as near misses one below their threshold) and on real profiles of the slow model and of
the learner's fast_forward, which must match the slow model's output and beat it in the same run."""

from __future__ import annotations

import itertools

import pytest
import torch

from roadmap_cli import grading_kit as kit

import adapter
import refs

SECTION = "Part 3: the planted bottlenecks"
LABELS = sorted(refs.THRESHOLDS)
SUBSETS = [set(c) for n in range(4) for c in itertools.combinations(LABELS, n)]


def _check(trace, planted, what):
    got = adapter.call("find_bottlenecks", trace)
    want = sorted(planted)
    counts = refs.bottleneck_counts(trace)
    assert got == want, (f"find_bottlenecks({what}): {got}, expected {want} (counts in the trace: {counts}; "
                         f"thresholds {refs.THRESHOLDS}) {refs.where(SECTION)}")


@pytest.mark.parametrize("subset", range(len(SUBSETS)), ids=["+".join(sorted(s)) or "none" for s in SUBSETS])
def test_find_bottlenecks_cpu_traces(subset):
    planted = SUBSETS[subset]
    _check(refs.bottleneck_trace(refs.rng(f"bn-cpu-{subset}"), planted, cuda=False), planted,
           f"a CPU trace with {sorted(planted) or 'nothing'} planted")


@pytest.mark.parametrize("subset", [0, 1, 7])
def test_find_bottlenecks_cuda_syncs(subset):
    planted = SUBSETS[subset]
    _check(refs.bottleneck_trace(refs.rng(f"bn-cuda-{subset}"), planted, cuda=True), planted,
           f"a CUDA trace (cudaStreamSynchronize counts as a sync) with {sorted(planted) or 'nothing'} planted")


def _run():
    r = refs.rng("models")
    cfg = (r.randint(2, 3), r.choice([12, 16, 24]), r.randint(9, 14), r.randrange(1 << 30))
    timing = {"layers": 4, "dim": 32, "batch": 64, "seed": r.randrange(1 << 30), "repeats": 5}
    return cfg, adapter.slow_and_fast(*cfg, timing)


RUN = kit.PerSeedCache(_run)


def test_slow_model_trace_shows_all_three():
    cfg, out = RUN()
    _check(out["slow_trace"], set(LABELS), f"a real profile of slow_forward (layers, dim, batch = {cfg[:3]})")


def _reference(weights, x):
    for w, b in weights:
        x = torch.tanh(x.double() @ w.double() + b.double())
    return x


def test_fast_forward_matches_slow():
    cfg, out = RUN()
    want = _reference(out["weights"], out["x"])
    for name in ("slow_out", "fast_out"):
        got = out[name]
        assert isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == torch.float32, (
            f"{name}: {type(got).__name__} {getattr(got, 'shape', '')} {getattr(got, 'dtype', '')}, expected a "
            f"float32 tensor of shape {tuple(want.shape)} {refs.where(SECTION)}")
        err = float((got.double() - want).abs().max())
        assert err <= 1e-5, (f"{'fast_forward' if name == 'fast_out' else 'slow_forward'} on layers, dim, batch = "
                             f"{cfg[:3]}: max |diff| {err:.3g} from tanh(x @ W + b) per layer {refs.where(SECTION)}")


def test_fast_forward_has_no_bottleneck():
    cfg, out = RUN()
    counts = refs.bottleneck_counts(out["fast_trace"])
    found = refs.find_bottlenecks(out["fast_trace"])
    assert not found, (f"a profile of your fast_forward (layers, dim, batch = {cfg[:3]}) still shows {found} "
                       f"(counts {counts}) {refs.where(SECTION)}")
    assert all(n == 0 for n in counts.values()), (
        f"a profile of your fast_forward shows {counts}: no sync, no contiguous copy, no small matmul at all "
        f"{refs.where(SECTION)}")


def test_fast_forward_is_faster():
    _, out = RUN()
    assert out["speedup"] >= 1.5, (
        f"fast_forward: best-of-5 time of slow_forward / fast_forward = {out['speedup']:.2f}x on 4 layers, dim 32, "
        f"batch 64, measured in the same run; at least 1.5x expected {refs.where(SECTION)}")
